#!/usr/bin/env python3
"""Peer of lorafleet-bench-train-step: the same LoRA training step in PyTorch + diffusers + peft.

The UNet is diffusers.UNet2DConditionModel configured to the lorafleet preset's architecture
(the mapping of tests/core/reference/make_core_references.py); the LoRA is peft's LoraConfig on
the twelve per-transformer targets kohya and lorafleet train (to_q, to_k, to_v, to_out.0 of both
attentions, proj_in, proj_out, ff.net.0.proj, ff.net.2), attached with unet.add_adapter as
diffusers' examples/text_to_image/train_text_to_image_lora.py does. Each step: noise and
timesteps, DDPMScheduler(scaled_linear).add_noise, UNet forward, F.mse_loss, backward,
torch.optim.AdamW step, zero_grad(set_to_none). Prints one JSON line in the C++ bench's schema.

--autocast runs the step's noise, add_noise, UNet forward and F.mse_loss(pred.float(),
target.float()) under torch.autocast(device_type, dtype=torch.bfloat16), backward and the
optimizer step outside it: what train_text_to_image_lora.py does under accelerate
mixed_precision="bf16" (accelerate wraps only unet.forward and casts its output to fp32; the
extra ops in the region have no autocast policy, and mse_loss on fp32 inputs stays fp32), and
the region lorafleet's compute_loss_sum covers. With --dtype bf16 that is the example's setup:
frozen UNet weights in bf16, LoRA weights fp32 (cast_training_params).

diffusers and peft must be importable (bench/run_train_step_bench.sh installs them into a bench
venv; on a machine with wheels carried in, put them on PYTHONPATH).
"""
import argparse
import json
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# lf::model_preset (worker/core/model/model_config.cpp), UNet part.
PRESETS = {
    "tiny": dict(model_channels=32, channel_mult=(1, 2), num_res_blocks=1,
                 attention_levels=(True, True), num_heads=2, context_dim=64,
                 use_linear_in_transformer=False, norm_num_groups=8),
    "sd15": dict(model_channels=320, channel_mult=(1, 2, 4, 4), num_res_blocks=2,
                 attention_levels=(True, True, True, False), num_heads=8, context_dim=768,
                 use_linear_in_transformer=False, norm_num_groups=32),
}
LORA_TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "proj_in", "proj_out", "ff.net.0.proj",
                "ff.net.2"]


def max_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def import_peers():
    try:
        import diffusers
        import peft
        from diffusers import DDPMScheduler, UNet2DConditionModel
        from peft import LoraConfig
    except ImportError as e:
        sys.exit(f"peer_diffusers_train_step.py: cannot import diffusers/peft ({e}); run "
                 "bench/run_train_step_bench.sh (it installs them) or put their wheels' "
                 "contents on PYTHONPATH")
    return diffusers, peft, DDPMScheduler, UNet2DConditionModel, LoraConfig


def build_unet(UNet2DConditionModel, preset):
    """diffusers UNet2DConditionModel with the ldm preset's architecture (SD1-style heads)."""
    p = PRESETS[preset]
    down = tuple("CrossAttnDownBlock2D" if a else "DownBlock2D" for a in p["attention_levels"])
    up = tuple("CrossAttnUpBlock2D" if a else "UpBlock2D"
               for a in reversed(p["attention_levels"]))
    return UNet2DConditionModel(
        sample_size=64, in_channels=4, out_channels=4, layers_per_block=p["num_res_blocks"],
        block_out_channels=tuple(p["model_channels"] * m for m in p["channel_mult"]),
        down_block_types=down, up_block_types=up, mid_block_type="UNetMidBlock2DCrossAttn",
        cross_attention_dim=p["context_dim"],
        attention_head_dim=p["num_heads"],  # diffusers' SD1 naming: this is the head count
        norm_num_groups=p["norm_num_groups"], norm_eps=1e-5,
        use_linear_projection=p["use_linear_in_transformer"])


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--latent", default="32x32", help="HxW")
    ap.add_argument("--network-dim", type=int, default=4)
    ap.add_argument("--network-alpha", type=float, default=0.0, help="<= 0: alpha = rank")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--autocast", action="store_true",
                    help="bf16 autocast around noise, UNet forward and loss")
    ap.add_argument("--gradient-checkpointing", action="store_true",
                    help="unet.enable_gradient_checkpointing(), as the diffusers example's flag")
    ap.add_argument("--memory-cap-gb", type=float, default=0.0,
                    help="CUDA: torch.cuda.set_per_process_memory_fraction for this many GiB")
    ap.add_argument("--init-lora-weights", default="gaussian",
                    help='peft init_lora_weights: "gaussian" (diffusers example) or "true"')
    a = ap.parse_args(argv)
    h, _, w = a.latent.partition("x")
    a.latent_h, a.latent_w = int(h), int(w)
    if a.batch < 1 or a.steps < 1 or a.warmup < 0 or a.threads < 1 or a.network_dim < 1:
        ap.error("batch, steps, threads, network-dim must be >= 1 and warmup >= 0")
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    diffusers, peft, DDPMScheduler, UNet2DConditionModel, LoraConfig = import_peers()
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit(f"peer_diffusers_train_step.py: --device {a.device}: CUDA is not available")
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    alpha = a.network_alpha if a.network_alpha > 0 else float(a.network_dim)
    rss_before = max_rss_mib()

    setup_start = time.perf_counter()
    if cuda and a.memory_cap_gb > 0:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, a.memory_cap_gb * 2**30 / total), device)
    torch.manual_seed(a.seed)
    unet = build_unet(UNet2DConditionModel, a.preset)
    if a.gradient_checkpointing:
        unet.enable_gradient_checkpointing()
    unet.requires_grad_(False)
    unet.to(device, dtype=dtype)
    init = True if a.init_lora_weights.lower() == "true" else a.init_lora_weights
    unet.add_adapter(LoraConfig(r=a.network_dim, lora_alpha=alpha, init_lora_weights=init,
                                target_modules=LORA_TARGETS))
    for p in unet.parameters():  # diffusers' cast_training_params: LoRA trains in fp32
        if p.requires_grad:
            p.data = p.data.to(torch.float32)
    lora_params = [p for p in unet.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(lora_params, lr=a.lr, betas=(0.9, 0.999), weight_decay=1e-2,
                                  eps=1e-8)
    scheduler = DDPMScheduler(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                              beta_schedule="scaled_linear")
    gen = torch.Generator().manual_seed(a.seed + 2)
    ctx_dim = PRESETS[a.preset]["context_dim"]
    latents = torch.randn(a.batch, 4, a.latent_h, a.latent_w, generator=gen).to(device, dtype)
    context = torch.randn(a.batch, 77, ctx_dim, generator=gen).to(device, dtype)
    if cuda:
        torch.cuda.synchronize(device)
    setup_s = time.perf_counter() - setup_start
    mem_after_setup = (torch.cuda.memory_allocated(device) / 2**20) if cuda else max_rss_mib()

    unet_params = sum(p.numel() for p in unet.parameters() if not p.requires_grad)
    lora_modules = sum(1 for m in unet.modules()
                       if hasattr(m, "lora_A") and len(getattr(m, "lora_A")) > 0)

    unet.train()
    times = []
    loss = None
    for step in range(a.warmup + a.steps):
        start = time.perf_counter()
        g = torch.Generator().manual_seed(a.seed * 1000003 + step)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.autocast):
            noise = torch.randn(latents.shape, generator=g)
            timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (a.batch,),
                                      generator=g)
            noise = noise.to(device, dtype)
            timesteps = timesteps.to(device)
            noisy = scheduler.add_noise(latents, noise, timesteps)
            pred = unet(noisy, timesteps, encoder_hidden_states=context, return_dict=False)[0]
            # As the diffusers example: the loss in fp32 whatever the UNet's output dtype.
            loss = F.mse_loss(pred.float(), noise.float(), reduction="mean")
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(device)
        if step >= a.warmup:
            times.append(time.perf_counter() - start)

    median = statistics.median(times)
    if cuda:
        peak, kind = torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    else:
        peak, kind = max_rss_mib(), "ru_maxrss"
    print(json.dumps({
        "impl": "diffusers", "torch": torch.__version__.split("+")[0],
        "diffusers": diffusers.__version__, "peft": peft.__version__,
        "preset": a.preset, "device": a.device, "dtype": a.dtype, "autocast": a.autocast,
        "gradient_checkpointing": a.gradient_checkpointing, "memory_cap_gb": a.memory_cap_gb,
        "batch": a.batch,
        "latent": f"{a.latent_h}x{a.latent_w}", "context_len": 77,
        "network_dim": a.network_dim, "network_alpha": alpha, "threads": a.threads,
        "warmup": a.warmup, "steps": a.steps, "unet_params": unet_params,
        "lora_params": sum(p.numel() for p in lora_params), "lora_modules": lora_modules,
        "median_step_s": median, "mean_step_s": statistics.fmean(times),
        "min_step_s": min(times), "steps_per_s": 1.0 / median,
        "samples_per_s": a.batch / median, "peak_mem_mib": peak, "peak_mem_kind": kind,
        "rss_before_model_mib": rss_before, "mem_after_setup_mib": mem_after_setup,
        "setup_s": setup_s, "final_loss": loss.item(),
    }))


if __name__ == "__main__":
    main()
