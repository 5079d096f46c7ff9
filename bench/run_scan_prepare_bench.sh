#!/usr/bin/env bash
# One command for the scan + prepare benchmark (bench/README.md): builds
# lorafleet-bench-scan-prepare, makes the benchmark image set if missing, runs it and the kohya
# peer (bench/scan_prepare_peer.py: Pillow + cv2 + numpy) with the same thread counts, checks
# that both chose the same bucket and resize for every image, and prints images/s and the
# lorafleet/peer ratio (same thread count on both sides, so also per core).
#
# usage: bench/run_scan_prepare_bench.sh [--threads "1 2"] [--repeats R] [--pool process|thread]
# Environment: BUILD_DIR (default build-scan-bench; any configured full tree works),
# IMAGES_DIR (default $BUILD_DIR/scan_prepare_images), PYTHON (default .venv/bin/python: needs
# Pillow, opencv-python-headless and numpy, installed by scripts/install_deps.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-scan-bench}"
IMAGES_DIR="${IMAGES_DIR:-$BUILD_DIR/scan_prepare_images}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
SKDATA="$ROOT/.deps/skimage/usr/lib/python3/dist-packages/skimage/data"
threads_list="1 2"
repeats=3
pool=process
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads_list="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --pool) pool="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
say() { echo "[bench] $*" >&2; }

"$PY" -c 'import PIL, cv2, numpy' 2>/dev/null || {
  say "$PY cannot import PIL, cv2 and numpy: run scripts/install_deps.sh"; exit 1; }
[ -f "$SKDATA/astronaut.png" ] || { say "no skimage photos in $SKDATA: run scripts/install_deps.sh"; exit 1; }

# ---- (a) build -------------------------------------------------------------------------------
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  gen=(-DCMAKE_BUILD_TYPE=Release -DLF_BUILD_TESTS=OFF)
  command -v ninja >/dev/null && gen+=(-G Ninja)
  say "configuring $BUILD_DIR"
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" >&2
fi
say "building lorafleet-bench-scan-prepare in $BUILD_DIR"
cmake --build "$BUILD_DIR" -j "$(nproc)" --target lorafleet-bench-scan-prepare >&2
bench_bin="$BUILD_DIR/bench/lorafleet-bench-scan-prepare"

# ---- (b) the image set: skimage colour photos at 3 sizes, JPEG and PNG, two aspect ratios ----
if [ ! -f "$IMAGES_DIR/.complete" ]; then
  say "making the benchmark images in $IMAGES_DIR"
  rm -rf "$IMAGES_DIR" && mkdir -p "$IMAGES_DIR"
  "$PY" - "$SKDATA" "$IMAGES_DIR" <<'EOF'
import os, sys
from PIL import Image
src, out = sys.argv[1], sys.argv[2]
photos = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "hubble_deep_field.jpg",
          "retina.jpg", "motorcycle_left.png", "ihc.png"]
n = 0
for name in photos:
    base = Image.open(os.path.join(src, name)).convert("RGB")
    for long_side in (768, 1280, 2048):
        s = long_side / max(base.size)
        full = base.resize((round(base.width * s), round(base.height * s)), Image.LANCZOS)
        # A second framing with the other orientation (3:4 portrait / 4:3 landscape crop).
        w, h = full.size
        if w >= h:
            cw, ch = min(w, h * 3 // 4), h
        else:
            cw, ch = w, min(h, w * 3 // 4)
        crop = full.crop(((w - cw) // 2, (h - ch) // 2, (w - cw) // 2 + cw, (h - ch) // 2 + ch))
        full.info, crop.info = {}, {}  # no ICC profile copied from the source photo
        stem = f"{os.path.splitext(name)[0]}_{long_side}"
        full.save(os.path.join(out, stem + ".jpg"), quality=90)
        full.save(os.path.join(out, stem + ".png"))
        # The crop stored rotated with EXIF orientation 6, as a camera held upright writes it.
        exif = Image.Exif()
        exif[0x0112] = 6
        crop.transpose(Image.ROTATE_90).save(os.path.join(out, stem + "_crop_o6.jpg"), quality=90,
                                             exif=exif.tobytes())
        crop.save(os.path.join(out, stem + "_crop.png"))
        n += 4
print(f"[bench] wrote {n} images", file=sys.stderr)
EOF
  touch "$IMAGES_DIR/.complete"
fi
nimg="$(find "$IMAGES_DIR" -maxdepth 1 -type f ! -name '.*' | wc -l)"
mib="$(du -sm "$IMAGES_DIR" | cut -f1)"

# ---- (c) both sides, alternating, per thread count ------------------------------------------
lines="$(mktemp)"
dumps="$(mktemp -d)"
trap 'rm -rf "$lines" "$dumps"' EXIT
say "machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
say "images: $nimg files, $mib MiB in $IMAGES_DIR"
say "load before: $(uptime | sed 's/.*load average/load average/')"
for t in $threads_list; do
  say "threads $t: lorafleet"
  "$bench_bin" --dir "$IMAGES_DIR" --threads "$t" --repeats "$repeats" --dump "$dumps/lf_$t" \
    | tee -a "$lines"
  say "threads $t: kohya peer ($pool pool)"
  "$PY" "$ROOT/bench/scan_prepare_peer.py" --dir "$IMAGES_DIR" --threads "$t" \
    --repeats "$repeats" --pool "$pool" --dump "$dumps/peer_$t" | tee -a "$lines"
done
say "load after: $(uptime | sed 's/.*load average/load average/')"

"$PY" - "$lines" "$dumps" <<'EOF'
import json, os, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
dumps = sys.argv[2]
peer0 = next(r for r in runs if r["impl"] != "lorafleet")
print(f"\n{runs[0]['images']} images, best of {runs[0]['repeats']} timed passes after one "
      f"warm-up; peer: Pillow {peer0['pillow']}, opencv-python {peer0['opencv']}, "
      f"numpy {peer0['numpy']}, {peer0['pool']} pool")
print(f"{'threads':>7}{'lorafleet img/s':>17}{'peer img/s':>12}{'lf/peer':>9}  same buckets  "
      f"max |mean diff|")
for t in sorted({r["threads"] for r in runs}):
    lf = next(r for r in runs if r["impl"] == "lorafleet" and r["threads"] == t)
    pe = next(r for r in runs if r["impl"] != "lorafleet" and r["threads"] == t)
    a = [l.split() for l in open(os.path.join(dumps, f"lf_{t}"))]
    b = [l.split() for l in open(os.path.join(dumps, f"peer_{t}"))]
    same = len(a) == len(b) and all(x[:5] == y[:5] for x, y in zip(a, b))
    diff = max(abs(float(x[5]) - float(y[5])) for x, y in zip(a, b))
    print(f"{t:>7}{lf['images_per_s']:>17.2f}{pe['images_per_s']:>12.2f}"
          f"{lf['images_per_s'] / pe['images_per_s']:>9.2f}  {'yes' if same else 'NO':>12}  "
          f"{diff:>14.3f}")
    if not same:
        for x, y in zip(a, b):
            if x[:5] != y[:5]:
                print("  differs:", " ".join(x[:5]), "vs", " ".join(y[:5]))
EOF
