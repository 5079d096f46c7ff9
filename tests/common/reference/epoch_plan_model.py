"""Independent Python model of common/data/epoch_plan.cpp's documented RNG streams, used for the
golden values of tests/common/test_epoch_plan.cpp (EpochPlan.GoldenOrderSeed42 and
EpochPlan.GoldenRandomRegAndDrawsSeed5). Run: python3 tests/common/reference/epoch_plan_model.py

Streams: E = mix(seed + (epoch+1)*gamma); order = mt19937_64(E); reg stream of dataset d =
mt19937_64(sub_seed(E, "reg-sel", d)); sample p = mt19937_64(sub_seed(E, "sample", p)).
"""
M64 = (1 << 64) - 1
class MT64:
    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & M64
        for i in range(1, 312):
            self.mt[i] = (6364136223846793005 * (self.mt[i-1] ^ (self.mt[i-1] >> 62)) + i) & M64
        self.i = 312
    def __call__(self):
        if self.i >= 312:
            for k in range(312):
                x = (self.mt[k] & 0xFFFFFFFF80000000) | (self.mt[(k+1) % 312] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1: xa ^= 0xB5026F5AA96619E9
                self.mt[k] = self.mt[(k+156) % 312] ^ xa
            self.i = 0
        y = self.mt[self.i]; self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & M64
r = MT64(5489)
for _ in range(9999): r()
assert r() == 9981545732273789042
G = 0x9E3779B97F4A7C15
def mix(z):
    z &= M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)
def epoch_seed(seed, e): return mix(seed + (e + 1) * G)
def sub_seed(E, dom, i): return mix(mix(E ^ dom) + (i + 1) * G)
REG = 0x7265672D73656C00; SAMPLE = 0x73616D706C650000
def bounded(rng, b):
    th = ((1 << 64) - b) % b
    while True:
        x = rng()
        if x >= th: return x % b
def fy(v, rng):
    for i in range(len(v), 1, -1):
        j = bounded(rng, i); v[i-1], v[j] = v[j], v[i-1]
def u01(rng): return (rng() >> 11) * 2.0**-53


def plan_order(samples, group_key, global_batch, rng):
    groups = {}
    for s in samples: groups.setdefault(group_key(s), []).append(s)
    batches = []
    for k in sorted(groups):
        g = groups[k]; fy(g, rng)
        batches += [g[j:j + global_batch] for j in range(0, len(g), global_batch)]
    fy(batches, rng)
    return batches

# GoldenOrderSeed42: images 0..3 train (repeats 3,2,1,4), 4..5 reg (kohya: 5 each); buckets
# 0,2,4 -> 512x512, 1,5 -> 640x384, 3 -> 384x640; world 2 x batch 2.
bucket = {0: (512, 512), 1: (640, 384), 2: (512, 512), 3: (384, 640), 4: (512, 512), 5: (640, 384)}
base = [0] * 3 + [1] * 2 + [2] + [3] * 4 + [4] * 5 + [5] * 5
for e in (0, 1):
    bs = plan_order(list(base), lambda i: bucket[i], 4, MT64(epoch_seed(42, e)))
    print("golden42 epoch", e, [i for b in bs for i in b])

# GoldenRandomRegAndDrawsSeed5: train "2_a" a01,a02 (flip_aug, random_crop, resized 520x530 in
# 512x512), reg "1_p" p01..p03 (no augmentation); R = 4; "random"; world 2 x batch 1; epoch 1.
seed, epoch = 5, 1
E = epoch_seed(seed, epoch)
samples = [[0], [0], [1], [1]]  # train a01 x2, a02 x2
L = [2, 3, 4]; R = 4
rr = MT64(sub_seed(E, REG, 0)); reg = []
while len(reg) < R:
    p = list(L); fy(p, rr); reg += p[:R - len(reg)]
samples += [[i] for i in reg]
out = []
for pos, s in enumerate(samples):
    i = s[0]
    if i < 2:  # train subset: random_crop then flip_aug; resized 520x530 for 512x512
        rng = MT64(sub_seed(E, SAMPLE, pos))
        left = bounded(rng, 9); top = bounded(rng, 19); flip = u01(rng) < 0.5
        out.append((i, left, top, flip))
    else:
        out.append((i, -1, -1, False))
batches = plan_order(out, lambda s: 0, 2, MT64(E))
print("reg", reg)
for b in batches: print(b)
