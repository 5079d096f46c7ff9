"""diffusers' schedulers for kohya's sample_sampler choices, run as kohya's sample pipeline runs
them (latents x init_noise_sigma; per timestep scale_model_input of [uncond, cond], the UNet,
classifier-free guidance, scheduler.step) on lorafleet's seeded tiny checkpoint, fp32 CPU.

Each scheduler is built as kohya train_util.get_my_scheduler builds it: num_train_timesteps=1000,
beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", plus prediction_type
v_prediction for the *_v cases, algorithm_type for dpmsolver++, use_karras_sigmas for the
*_karras cases (clip_sample=True for DDIM, its default). For every case it records:
  <case>.latent        [1,4,8,8]     the final latent
  <case>.inputs        [calls,2,4,8,8] the scaled model input of every call
  <case>.guided        [calls,1,4,8,8] the guided prediction of every call
  <case>.timesteps     [calls]       scheduler.timesteps (float64)
and shared inputs: noise [1,4,8,8], context [2,16,C] (negative prompt, prompt), ancestral [steps,1,4,8,8]
(the draws euler_a's step takes from its generator, in order). Compared by
tests/core/test_oracle_sampler.cpp with lorafleet's run_sampler: replaying the recorded
predictions (atol 1e-5: the schedulers' arithmetic) and with lorafleet's own UNet (atol 1e-4).

Run: tests/oracle/regen.sh (or: python make_sampler_fixture.py --checkpoint CKPT --output FILE).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_lib as ol  # noqa: E402

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

INPUT_SEED = 4242
ANCESTRAL_SEED = 99
STEPS = 6
GUIDANCE = 7.5
CASES = [  # name, diffusers class, karras, v_prediction
    ("ddim", "DDIMScheduler", False, False),
    ("euler", "EulerDiscreteScheduler", False, False),
    ("euler_a", "EulerAncestralDiscreteScheduler", False, False),
    ("dpmsolver++", "DPMSolverMultistepScheduler", False, False),
    ("k_dpm_2", "KDPM2DiscreteScheduler", False, False),
    ("euler_karras", "EulerDiscreteScheduler", True, False),
    ("dpmsolver++_karras", "DPMSolverMultistepScheduler", True, False),
    ("k_dpm_2_karras", "KDPM2DiscreteScheduler", True, False),
    ("ddim_v", "DDIMScheduler", False, True),
    ("euler_a_v", "EulerAncestralDiscreteScheduler", False, True),
    ("dpmsolver++_v", "DPMSolverMultistepScheduler", False, True),
    ("k_dpm_2_v", "KDPM2DiscreteScheduler", False, True),
]




def make_scheduler(cls_name, karras, v_pred):
    import diffusers
    kwargs = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                  beta_schedule="scaled_linear")
    if v_pred:
        kwargs["prediction_type"] = "v_prediction"
    if cls_name == "DPMSolverMultistepScheduler":
        kwargs["algorithm_type"] = "dpmsolver++"
    if karras:
        kwargs["use_karras_sigmas"] = True
    return getattr(diffusers, cls_name)(**kwargs)


def run_case(unet, context, noise, cls_name, karras, v_pred):
    sched = make_scheduler(cls_name, karras, v_pred)
    sched.set_timesteps(STEPS)
    latents = noise * sched.init_noise_sigma
    gen = torch.Generator().manual_seed(ANCESTRAL_SEED)
    inputs, guided_all = [], []
    for t in sched.timesteps:
        model_input = sched.scale_model_input(torch.cat([latents] * 2), t)
        out = unet(model_input, t, context).sample
        uncond, cond = out.chunk(2)
        guided = uncond + GUIDANCE * (cond - uncond)
        inputs.append(model_input)
        guided_all.append(guided)
        extra = {"generator": gen} if cls_name == "EulerAncestralDiscreteScheduler" else {}
        if cls_name == "DDIMScheduler":
            extra["eta"] = 0.0
        latents = sched.step(guided, t, latents, **extra).prev_sample
    return {"latent": latents, "inputs": torch.stack(inputs), "guided": torch.stack(guided_all),
            "timesteps": sched.timesteps.to(torch.float64)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    spec = ol.PRESETS["tiny"]
    from diffusers import UNet2DConditionModel
    with safe_open(args.checkpoint, "pt") as f:
        file_meta = f.metadata() or {}
    ckpt = ol.RecordingDict(load_file(args.checkpoint))
    unet = ol.load_single_file(UNet2DConditionModel, "unet", ckpt, spec.original_config,
                               spec.unet_overrides, "model.diffusion_model.")
    g = torch.Generator().manual_seed(INPUT_SEED)
    # The prompt's conditioning differs from the negative prompt's as real text embeddings do:
    # a shared part and a smaller prompt-specific one (pure noise for both would make the guided
    # prediction, and the latents, an order of magnitude larger than a real model's).
    uncond = torch.randn(1, 16, unet.config.cross_attention_dim, generator=g)
    cond = uncond + 0.25 * torch.randn(1, 16, unet.config.cross_attention_dim, generator=g)
    out = {"noise": torch.randn(1, 4, 8, 8, generator=g), "context": torch.cat([uncond, cond])}
    a = torch.Generator().manual_seed(ANCESTRAL_SEED)
    out["ancestral"] = torch.stack([torch.randn(1, 4, 8, 8, generator=a) for _ in range(STEPS)])
    with torch.no_grad():
        for name, cls_name, karras, v_pred in CASES:
            for k, v in run_case(unet, out["context"], out["noise"], cls_name, karras,
                                 v_pred).items():
                out[f"{name}.{k}"] = v
    import diffusers
    meta = {"preset": "tiny", "checkpoint_sha256": ol.sha256_file(args.checkpoint),
            "checkpoint_seed": file_meta.get("lorafleet.seed", ""), "steps": str(STEPS),
            "guidance_scale": repr(GUIDANCE), "cases": ",".join(c[0] for c in CASES),
            "diffusers": diffusers.__version__,
            "generator": "tests/oracle/make_sampler_fixture.py"}
    save_file({k: v.detach().contiguous() for k, v in out.items()}, args.output, metadata=meta)
    print(f"wrote {args.output}: {len(CASES)} sampler cases")


if __name__ == "__main__":
    main()
