#!/usr/bin/env python3
"""Peer of lorafleet-bench-sample: one sample image in diffusers, as kohya's sample pipeline runs
it: latents x init_noise_sigma; per timestep scale_model_input of [uncond, cond], the UNet,
classifier-free guidance, scheduler.step; then the VAE decode and the 8-bit conversion
(numpy_to_pil's rounding). The UNet and VAE are diffusers' UNet2DConditionModel and
AutoencoderKL loaded from the same lorafleet-make-checkpoint file the C++ bench generates (through
tests/oracle/oracle_lib's single-file loader); the scheduler is built as kohya's
get_my_scheduler builds it. Prints one JSON line in the C++ bench's schema.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "oracle"))
import oracle_lib as ol  # noqa: E402

FULL_SIZE_CONFIGS = {"sd15": "v1-inference.yaml"}
SCHEDULERS = {"ddim": "DDIMScheduler", "euler": "EulerDiscreteScheduler",
              "euler_a": "EulerAncestralDiscreteScheduler",
              "dpmsolver++": "DPMSolverMultistepScheduler", "k_dpm_2": "KDPM2DiscreteScheduler"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--sampler", default="euler_a")
    for k, d in [("steps", 20), ("width", 512), ("height", 512), ("images", 5), ("warmup", 1),
                 ("threads", 1)]:
        ap.add_argument(f"--{k}", type=int, default=d)
    ap.add_argument("--scale", type=float, default=7.5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import diffusers
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from safetensors.torch import load_file
    if a.preset in ol.PRESETS:  # the tiny presets: their ldm yaml and diffusers overrides
        spec = ol.PRESETS[a.preset]
        config, unet_overrides, vae_overrides = (spec.original_config, spec.unet_overrides,
                                                 spec.vae_overrides)
    else:  # full size: the original ldm config (tests/oracle/configs)
        config, unet_overrides, vae_overrides = FULL_SIZE_CONFIGS[a.preset], {}, {}
    ckpt = ol.RecordingDict(load_file(a.checkpoint))
    unet = ol.load_single_file(UNet2DConditionModel, "unet", ckpt, config, unet_overrides,
                               "model.diffusion_model.").eval()
    vae = ol.load_single_file(AutoencoderKL, "vae", ckpt, config, vae_overrides,
                              "first_stage_model.").eval()
    kwargs = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                  beta_schedule="scaled_linear")
    if a.sampler == "dpmsolver++":
        kwargs["algorithm_type"] = "dpmsolver++"
    sched = getattr(diffusers, SCHEDULERS[a.sampler])(**kwargs)
    gen = torch.Generator().manual_seed(7)
    context = torch.randn(2, 77, unet.config.cross_attention_dim, generator=gen)
    shape = (1, vae.config.latent_channels, a.height // 8, a.width // 8)
    scale_factor = vae.config.scaling_factor
    seconds = []
    with torch.no_grad():
        for i in range(a.warmup + a.images):
            t0 = time.perf_counter()
            sched.set_timesteps(a.steps)
            latents = torch.randn(shape, generator=gen) * sched.init_noise_sigma
            extra = {"generator": gen} if a.sampler == "euler_a" else {}
            for t in sched.timesteps:
                x = sched.scale_model_input(torch.cat([latents] * 2), t)
                out = unet(x, t, context).sample
                uncond, cond = out.chunk(2)
                latents = sched.step(uncond + a.scale * (cond - uncond), t, latents,
                                     **extra).prev_sample
            image = vae.decode(latents / scale_factor).sample
            image = ((image / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8)
            if i >= a.warmup:
                seconds.append(time.perf_counter() - t0)
    print(json.dumps({"impl": "diffusers " + diffusers.__version__, "preset": a.preset,
                      "sampler": a.sampler, "steps": a.steps, "width": a.width,
                      "height": a.height, "threads": a.threads, "images": a.images,
                      "seconds_per_image": statistics.median(seconds), "seconds": seconds}))


if __name__ == "__main__":
    main()
