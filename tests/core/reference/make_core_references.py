#!/usr/bin/env python3
"""Generates tests/core/reference/core_references.inc: golden values for the lf_train_core tests.

The references come from independent public implementations, not from lorafleet code:
  * UNet      diffusers.UNet2DConditionModel (tiny preset), keys mapped diffusers -> ldm with the
              general (L+1) index rule of diffusers' convert_ldm_unet_checkpoint;
  * VAE       diffusers.AutoencoderKL encoder + quant_conv (tiny preset), keys mapped -> ldm;
  * CLIP      transformers.CLIPTextModel (tiny preset), HF keys under text_model.;
  * LoRA      kohya's lora_name rule applied to diffusers' Transformer2DModel children;
  * training  diffusers.DDPMScheduler, transformers LR schedules, torch.optim.AdamW,
              torch.nn.utils.clip_grad_norm_.
Weights and inputs are not random: every tensor is a pure-integer hash of its name (FNV-1a 64 of
the key, then the SplitMix64 stream), which tests/core/core_test_util.cpp reproduces bit for bit,
so only outputs are stored.

Run (needs torch, numpy, diffusers, transformers):
    python tests/core/reference/make_core_references.py > tests/core/reference/core_references.inc
"""
import math
import sys

import numpy as np
import torch

M64 = (1 << 64) - 1

# Tiny preset, must equal lf::model_preset("tiny") (worker/core/model/model_config.cpp).
UNET_L = 1
UNET_CH = (32, 64)
UNET_CTX = 64
VAE_CH = (16, 32, 32, 32)
CLIP_HIDDEN, CLIP_LAYERS, CLIP_HEADS, CLIP_FF = 64, 2, 2, 128


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h ^= b
        h = (h * 0x100000001B3) & M64
    return h


def ref_values(key, n):
    """float64 in [-1, 1): 2 * (splitmix64_k(fnv1a64(key)) >> 11) * 2^-53 - 1, k = 1..n."""
    h = np.uint64(fnv1a64(key))
    k = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = h + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return 2.0 * u - 1.0


def ref_param(key, shape):
    """>= 2-D: v * sqrt(3 / fan_in); 1-D "*weight": 1 + 0.1 v; other 1-D: 0.1 v (float32)."""
    n = int(np.prod(shape))
    v = ref_values(key, n)
    if len(shape) >= 2:
        v = v * math.sqrt(3.0 / (n // shape[0]))
    elif key.endswith("weight"):
        v = 1.0 + 0.1 * v
    else:
        v = 0.1 * v
    return torch.from_numpy(v.astype(np.float32)).reshape(shape)


def load_hashed_vae(vae, key_to_ldm):
    """Loads ref_param(ldm key) into every VAE tensor key_to_ldm maps (zeros elsewhere); the
    mid-attention Linear weights get the values of ldm's conv 1x1. Returns the ldm keys, sorted."""
    sd, keys = {}, []
    for k, v in vae.state_dict().items():
        lk = key_to_ldm(k)
        if lk is None:
            sd[k] = torch.zeros_like(v)
            continue
        keys.append(lk)
        shape = list(v.shape)
        if ".attn_1." in lk and lk.endswith("weight") and len(shape) == 2:
            sd[k] = ref_param(lk, shape + [1, 1]).reshape(shape)  # ldm stores conv 1x1
        else:
            sd[k] = ref_param(lk, shape)
    vae.load_state_dict(sd, strict=True)
    return sorted(keys)


def ref_input(key, shape, scale=1.0):
    n = int(np.prod(shape))
    return torch.from_numpy((ref_values(key, n) * scale).astype(np.float32)).reshape(shape)


# ---------------------------------------------------------------------------------------------
# diffusers -> ldm key mapping (general L)
RES = {"norm1": "in_layers.0", "conv1": "in_layers.2", "time_emb_proj": "emb_layers.1",
       "norm2": "out_layers.0", "conv2": "out_layers.3", "conv_shortcut": "skip_connection"}


def unet_key_to_ldm(key, L, attn_up):
    p = key.split(".")
    if p[0] == "conv_in":
        return "input_blocks.0.0." + ".".join(p[1:])
    if p[0] == "time_embedding":
        return {"linear_1": "time_embed.0", "linear_2": "time_embed.2"}[p[1]] + "." + p[2]
    if p[0] == "conv_norm_out":
        return "out.0." + p[1]
    if p[0] == "conv_out":
        return "out.2." + p[1]
    if p[0] == "down_blocks":
        i = int(p[1])
        if p[2] == "resnets":
            j = int(p[3])
            return f"input_blocks.{1 + i * (L + 1) + j}.0.{RES[p[4]]}." + ".".join(p[5:])
        if p[2] == "attentions":
            j = int(p[3])
            return f"input_blocks.{1 + i * (L + 1) + j}.1." + ".".join(p[4:])
        if p[2] == "downsamplers":
            return f"input_blocks.{(i + 1) * (L + 1)}.0.op." + ".".join(p[5:])
    if p[0] == "mid_block":
        if p[1] == "resnets":
            return f"middle_block.{0 if p[2] == '0' else 2}.{RES[p[3]]}." + ".".join(p[4:])
        if p[1] == "attentions":
            return "middle_block.1." + ".".join(p[3:])
    if p[0] == "up_blocks":
        i = int(p[1])
        if p[2] == "resnets":
            j = int(p[3])
            return f"output_blocks.{i * (L + 1) + j}.0.{RES[p[4]]}." + ".".join(p[5:])
        if p[2] == "attentions":
            j = int(p[3])
            return f"output_blocks.{i * (L + 1) + j}.1." + ".".join(p[4:])
        if p[2] == "upsamplers":
            idx = 2 if attn_up[i] else 1
            return f"output_blocks.{i * (L + 1) + L}.{idx}.conv." + ".".join(p[5:])
    raise KeyError(key)


VAE_ATTN = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out": "proj_out"}


def vae_key_to_ldm(key):
    p = key.split(".")
    if p[0] == "quant_conv":
        return key
    if p[0] != "encoder":
        return None  # decoder half / post_quant_conv: not used
    q = p[1:]
    if q[0] in ("conv_in", "conv_out"):
        return key
    if q[0] == "conv_norm_out":
        return "encoder.norm_out." + q[1]
    if q[0] == "down_blocks":
        if q[2] == "resnets":
            sub = "nin_shortcut" if q[4] == "conv_shortcut" else q[4]
            return f"encoder.down.{q[1]}.block.{q[3]}.{sub}.{q[5]}"
        if q[2] == "downsamplers":
            return f"encoder.down.{q[1]}.downsample.conv.{q[5]}"
    if q[0] == "mid_block":
        if q[1] == "resnets":
            return f"encoder.mid.block_{int(q[2]) + 1}.{q[3]}.{q[4]}"
        if q[1] == "attentions":
            return f"encoder.mid.attn_1.{VAE_ATTN[q[3]]}.{q[-1]}"
    raise KeyError(key)


# ---------------------------------------------------------------------------------------------
out = []


def emit_floats(name, t):
    vals = t.detach().to(torch.float32).flatten().tolist()
    rows = [vals[i:i + 6] for i in range(0, len(vals), 6)]
    body = ",\n  ".join(", ".join("%.9g" % v for v in row) for row in rows)
    out.append(f"constexpr float {name}[] = {{\n  {body}}};")
    out.append(f"constexpr std::array<int64_t, {t.dim()}> {name}_shape = "
               f"{{{', '.join(str(s) for s in t.shape)}}};")


def emit_doubles(name, vals):
    rows = [vals[i:i + 4] for i in range(0, len(vals), 4)]
    body = ",\n  ".join(", ".join(repr(float(v)) for v in row) for row in rows)
    out.append(f"constexpr double {name}[] = {{\n  {body}}};")


def emit_ints(name, vals, ctype="int64_t"):
    rows = [vals[i:i + 12] for i in range(0, len(vals), 12)]
    body = ",\n  ".join(", ".join(str(v) for v in row) for row in rows)
    out.append(f"constexpr {ctype} {name}[] = {{\n  {body}}};")


def emit_strings(name, vals):
    body = ",\n  ".join(f'"{v}"' for v in vals)
    out.append(f"constexpr const char* {name}[] = {{\n  {body}}};")


def main():
    from diffusers import AutoencoderKL, DDPMScheduler, UNet2DConditionModel
    from diffusers.models.embeddings import get_timestep_embedding
    from transformers import CLIPTextConfig, CLIPTextModel
    import transformers
    import diffusers

    torch.set_grad_enabled(False)
    out.append("// Generated by tests/core/reference/make_core_references.py with")
    out.append(f"// torch {torch.__version__.split('+')[0]}, diffusers {diffusers.__version__}, "
               f"transformers {transformers.__version__}.")
    out.append("// Do not edit; regenerate instead.")

    # ---- UNet ----
    unet = UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=UNET_L,
        block_out_channels=UNET_CH,
        down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=UNET_CTX, attention_head_dim=2, norm_num_groups=8,
        use_linear_projection=False).eval()
    attn_up = [True, True]
    sd = {}
    ldm_keys = []
    for k, v in unet.state_dict().items():
        lk = unet_key_to_ldm(k, UNET_L, attn_up)
        ldm_keys.append(lk)
        sd[k] = ref_param(lk, list(v.shape))
    assert len(set(ldm_keys)) == len(ldm_keys)
    unet.load_state_dict(sd, strict=True)
    x = ref_input("unet.x", [2, 4, 8, 8])
    ctx = ref_input("unet.context", [2, 7, UNET_CTX])
    t = torch.tensor([10, 981], dtype=torch.int64)
    eps = unet(x, t, encoder_hidden_states=ctx).sample
    emit_strings("kUNetTinyKeys", sorted(ldm_keys))
    emit_ints("kUNetTimesteps", t.tolist())
    emit_floats("kUNetTinyOutput", eps)

    lora_names = []
    for name, module in unet.named_modules():
        if module.__class__.__name__ == "Transformer2DModel":
            for child_name, child in module.named_modules():
                if isinstance(child, (torch.nn.Linear, torch.nn.Conv2d)):
                    lora_names.append(("lora_unet." + name + "." + child_name).replace(".", "_"))
    emit_strings("kUNetTinyLoRANames", sorted(lora_names))

    with torch.device("meta"):
        sd15 = UNet2DConditionModel(cross_attention_dim=768, attention_head_dim=8)
    emit_ints("kSD15UNetParameters", [sum(p.numel() for p in sd15.parameters())])
    sd15_lora, rank = {}, 4
    for name, module in sd15.named_modules():
        if module.__class__.__name__ == "Transformer2DModel":
            for child_name, child in module.named_modules():
                if isinstance(child, torch.nn.Linear):
                    n = rank * (child.in_features + child.out_features)
                elif isinstance(child, torch.nn.Conv2d):
                    n = rank * (child.in_channels + child.out_channels)
                else:
                    continue
                sd15_lora[("lora_unet." + name + "." + child_name).replace(".", "_")] = n
    emit_ints("kSD15LoRAModules", [len(sd15_lora)])
    emit_ints("kSD15LoRARank4Parameters", [sum(sd15_lora.values())])

    temb = get_timestep_embedding(torch.tensor([0, 10, 981]), 32, flip_sin_to_cos=True,
                                  downscale_freq_shift=0)
    emit_floats("kTimestepEmbedding32", temb)

    # ---- VAE encoder ----
    vae = AutoencoderKL(in_channels=3, out_channels=3,
                        down_block_types=("DownEncoderBlock2D",) * 4,
                        up_block_types=("UpDecoderBlock2D",) * 4, block_out_channels=VAE_CH,
                        layers_per_block=1, latent_channels=4, norm_num_groups=8).eval()
    vae_keys = load_hashed_vae(vae, vae_key_to_ldm)
    img = ref_input("vae.x", [1, 3, 32, 32])
    dist = vae.encode(img).latent_dist
    emit_strings("kVAETinyKeys", sorted(vae_keys))
    emit_floats("kVAETinyMean", dist.mean)
    emit_floats("kVAETinyLogvar", dist.logvar)

    # ---- CLIP text ----
    cfg = CLIPTextConfig(vocab_size=49408, hidden_size=CLIP_HIDDEN, intermediate_size=CLIP_FF,
                         num_hidden_layers=CLIP_LAYERS, num_attention_heads=CLIP_HEADS,
                         max_position_embeddings=77, hidden_act="quick_gelu", layer_norm_eps=1e-5)
    clip = CLIPTextModel(cfg).eval()
    sd = {}
    clip_keys = []
    for k, v in clip.state_dict().items():
        # transformers 5 flattened CLIPTextModel (no "text_model." level); 4.x had it.
        lk = k[len("text_model."):] if k.startswith("text_model.") else k
        if lk == "embeddings.position_ids":
            sd[k] = v
            continue
        clip_keys.append(lk)
        sd[k] = ref_param(lk, list(v.shape))
    clip.load_state_dict(sd, strict=False)
    ids = (torch.from_numpy(((ref_values("clip.ids", 2 * 77) + 1.0) * 0.5 * 49406).astype(np.int64))
           .reshape(2, 77))
    ids[:, 0] = 49406
    ids[0, 20:] = 49407
    ids[1, 60:] = 49407
    res = clip(ids, output_hidden_states=True)
    pos = [0, 1, 5, 19, 20, 40, 76]
    last = res.last_hidden_state[:, pos, :]
    final_ln = getattr(clip, "text_model", clip).final_layer_norm
    skip2 = final_ln(res.hidden_states[-2])[:, pos, :]
    emit_strings("kCLIPTinyKeys", sorted(clip_keys))
    emit_ints("kCLIPTinyInputIds", ids.flatten().tolist())
    emit_ints("kCLIPPositions", pos)
    emit_floats("kCLIPTinyLastHidden", last)
    emit_floats("kCLIPTinyClipSkip2", skip2)

    # ---- noise schedule ----
    sched = DDPMScheduler(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                          beta_schedule="scaled_linear", clip_sample=False)
    b64 = torch.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=torch.float64) ** 2
    abar64 = torch.cumprod(1.0 - b64, 0)
    idx = [0, 1, 499, 998, 999]
    emit_ints("kAlphasCumprodIndex", idx)
    emit_doubles("kAlphasCumprodF64", abar64[idx].tolist())
    emit_doubles("kAlphasCumprodDiffusersF32", sched.alphas_cumprod[idx].double().tolist())
    x0 = ref_input("noise.x0", [3, 4, 2, 2])
    nz = ref_input("noise.eps", [3, 4, 2, 2])
    tt = torch.tensor([0, 500, 999])
    emit_ints("kAddNoiseTimesteps", tt.tolist())
    emit_floats("kAddNoiseDiffusers", sched.add_noise(x0, nz, tt))

    # ---- LR schedules ----
    from transformers import (get_constant_schedule, get_constant_schedule_with_warmup,
                              get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup)
    steps = [0, 1, 5, 9, 10, 11, 37, 50, 99, 100, 120]
    emit_ints("kLRSteps", steps)
    W, N, base = 10, 100, 1e-4

    def lrs(make):
        p = torch.nn.Parameter(torch.zeros(1))
        s = make(torch.optim.AdamW([p], lr=base))
        return [base * s.lr_lambdas[0](st) for st in steps]

    emit_doubles("kLRConstant", lrs(lambda o: get_constant_schedule(o)))
    emit_doubles("kLRConstantWithWarmup", lrs(lambda o: get_constant_schedule_with_warmup(o, W)))
    emit_doubles("kLRLinear", lrs(lambda o: get_linear_schedule_with_warmup(o, W, N)))
    emit_doubles("kLRCosine", lrs(lambda o: get_cosine_schedule_with_warmup(o, W, N)))

    # ---- AdamW and clipping ----
    params = [torch.nn.Parameter(ref_input("opt.p0", [3, 5])),
              torch.nn.Parameter(ref_input("opt.p1", [4]))]
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                            foreach=False)
    step_lrs = [1e-3, 5e-4, 2e-4]
    emit_doubles("kAdamWLRs", step_lrs)
    for s, lr in enumerate(step_lrs):
        for i, p in enumerate(params):
            p.grad = ref_input(f"opt.grad{s}.{i}", list(p.shape))
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
    emit_floats("kAdamWP0", params[0])
    emit_floats("kAdamWP1", params[1])
    for i, p in enumerate(params):
        p.grad = ref_input(f"clip.grad.{i}", list(p.shape), scale=2.0)
    total = torch.nn.utils.clip_grad_norm_(params, 1.0)
    emit_doubles("kClipTotalNorm", [total.item()])
    emit_floats("kClipG0", params[0].grad)
    emit_floats("kClipG1", params[1].grad)

    # ---- seeding ----
    def splitmix(state):
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return state, z ^ (z >> 31)

    def mix_seed(seed, a, b):
        _, h = splitmix(seed)
        _, h = splitmix(h ^ a)
        _, h = splitmix(h ^ b)
        return h

    cases = [(0, 0, 0), (42, 0, 0), (42, 1, 0), (42, 0, 1), (1234567, 3, 99999),
             (M64, M64, M64)]
    out.append("constexpr uint64_t kMixSeedCases[][4] = {")
    for c in cases:
        out.append(f"  {{{c[0]}ULL, {c[1]}ULL, {c[2]}ULL,")
        out.append(f"   {mix_seed(*c)}ULL}},")
    out.append("};")

    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
