"""kohya's noise, timestep and loss options on fixed inputs, as kohya sd-scripts computes them.

kohya is not on PyPI, so each function below restates one of kohya's (named in its docstring)
on top of diffusers' DDPMScheduler, built as kohya builds it (scaled_linear 0.00085..0.012, 1000
steps), with diffusers' compute_snr as the SNR. The random draws kohya takes inside
(torch.randn, random.random) are drawn here from a seeded generator and stored, so the C++ test
(tests/core/test_oracle_loss_recipe.cpp) feeds lorafleet the same draws:

  inputs   latents, noise, pred [4, 4, 8, 8]; timesteps [4] = 0, 1, 500, 999 (one per sample);
           offset_noise [4, 4, 1, 1]; ip_noise [4, 4, 8, 8]; pyramid.r [L], pyramid.draw<i>
  schedule snr [1000] (compute_snr), alphas_cumprod [1000]; zt.alphas_cumprod after kohya
           fix_noise_scheduler_betas_for_zero_terminal_snr (checked against diffusers'
           rescale_betas_zero_snr). kohya takes all_snr before that fix, so the SNR weights
           of a zero-terminal run use `snr` too.
  noise    noise.offset (0.0357), noise.offset_adaptive (0.0357, +0.5), noise.offset_clamped
           (0.0357, -10: the clamp at 0), noise.pyramid (6 iterations, discount 0.3),
           noisy.ip (add_noise of noise + 0.1 * ip_noise)
  huber    huber_c.constant / .exponential / .snr [4] (huber_c 0.1, huber_scale 2 where used)
  loss     loss.l2 / .l1 / .huber / .smooth_l1 [4]: conditional_loss(pred, noise, type, "none",
           huber_c.snr).mean([1, 2, 3])
  weights  weighted.<option> [4]: train_network post_process_loss of loss.l2 with one option:
           min_snr5, min_snr5_v, scale_v, v_pred_like0.5, debiased, debiased_v

Run: tests/oracle/regen.sh (or: python make_loss_fixture.py --output FILE).
"""
import argparse
import math

import diffusers
import torch
from diffusers import DDPMScheduler
from diffusers.training_utils import compute_snr
from safetensors.torch import save_file

SEED = 20261202


def scheduler(**kwargs):
    return DDPMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                         num_train_timesteps=1000, clip_sample=False, **kwargs)


def fix_zero_terminal_snr(sched):
    """kohya custom_train_functions.fix_noise_scheduler_betas_for_zero_terminal_snr."""
    alphas_bar_sqrt = (1 - sched.betas).cumprod(0).sqrt()
    s0, s_t = alphas_bar_sqrt[0].clone(), alphas_bar_sqrt[-1].clone()
    alphas_bar_sqrt -= s_t
    alphas_bar_sqrt *= s0 / (s0 - s_t)
    alphas_bar = alphas_bar_sqrt ** 2
    alphas = torch.cat([alphas_bar[0:1], alphas_bar[1:] / alphas_bar[:-1]])
    sched.betas = 1 - alphas
    sched.alphas = 1.0 - sched.betas
    sched.alphas_cumprod = torch.cumprod(sched.alphas, dim=0)


def apply_noise_offset(latents, noise, noise_offset, adaptive_noise_scale, offset_noise):
    """kohya custom_train_functions.apply_noise_offset, its randn given as offset_noise."""
    if adaptive_noise_scale is not None:
        latent_mean = torch.abs(latents.mean(dim=(2, 3), keepdim=True))
        noise_offset = torch.clamp(noise_offset + adaptive_noise_scale * latent_mean, 0.0, None)
    return noise + noise_offset * offset_noise


def pyramid_noise_like(noise, rs, draws, discount):
    """kohya custom_train_functions.pyramid_noise_like, its random.random / randn given."""
    b, c, w, h = noise.shape
    u = torch.nn.Upsample(size=(w, h), mode="bilinear")
    noise = noise.clone()
    for i, (r, draw) in enumerate(zip(rs, draws)):
        noise += u(draw) * discount ** i
    return noise / noise.std()


def pyramid_draws(gen, noise, iterations):
    """The draws kohya's loop takes: r = random.random() * 2 + 2, then randn(b, c, wn, hn)."""
    b, c, w, h = noise.shape
    rs, draws = [], []
    for i in range(iterations):
        r = float(torch.rand(1, generator=gen)) * 2 + 2
        wn, hn = max(1, int(w / (r ** i))), max(1, int(h / (r ** i)))
        rs.append(r)
        draws.append(torch.randn(b, c, wn, hn, generator=gen))
        if wn == 1 or hn == 1:
            break
    return rs, draws


def huber_threshold(schedule, timesteps, sched, huber_c, huber_scale):
    """kohya train_util.get_huber_threshold_if_needed."""
    if schedule == "exponential":
        alpha = -math.log(huber_c) / sched.config.num_train_timesteps
        return torch.exp(-alpha * timesteps) * huber_scale
    if schedule == "snr":
        alphas_cumprod = torch.index_select(sched.alphas_cumprod, 0, timesteps)
        sigmas = ((1.0 - alphas_cumprod) / alphas_cumprod) ** 0.5
        return (1 - huber_c) / (1 + sigmas) ** 2 + huber_c
    return torch.full((timesteps.shape[0],), huber_c * huber_scale)


def conditional_loss(pred, target, loss_type, huber_c):
    """kohya train_util.conditional_loss with reduction "none"."""
    if loss_type == "l2":
        return torch.nn.functional.mse_loss(pred, target, reduction="none")
    if loss_type == "l1":
        return torch.nn.functional.l1_loss(pred, target, reduction="none")
    c = huber_c.view(-1, 1, 1, 1)
    if loss_type == "huber":
        return 2 * c * (torch.sqrt((pred - target) ** 2 + c ** 2) - c)
    return 2 * (torch.sqrt((pred - target) ** 2 + c ** 2) - c)


def snr_scale(snr_t):
    """kohya custom_train_functions.get_snr_scale."""
    snr_t = torch.minimum(snr_t, torch.ones_like(snr_t) * 1000)
    return snr_t / (snr_t + 1)


def post_process(loss, snr_t, option):
    """One step of kohya train_network.post_process_loss (custom_train_functions)."""
    if option.startswith("min_snr5"):  # apply_snr_weight, gamma 5
        capped = torch.minimum(snr_t, torch.full_like(snr_t, 5.0))
        return loss * (capped / (snr_t + 1) if option.endswith("_v") else capped / snr_t)
    if option == "scale_v":  # scale_v_prediction_loss_like_noise_prediction
        return loss * snr_scale(snr_t)
    if option == "v_pred_like0.5":  # add_v_prediction_like_loss
        return loss + loss / snr_scale(snr_t) * 0.5
    capped = torch.minimum(snr_t, torch.ones_like(snr_t) * 1000)  # apply_debiased_estimation
    return loss * (1 / (capped + 1) if option.endswith("_v") else 1 / torch.sqrt(capped))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", required=True)
    out_path = ap.parse_args().output
    gen = torch.Generator().manual_seed(SEED)
    latents = torch.randn(4, 4, 8, 8, generator=gen) * 0.8 + 0.3
    noise = torch.randn(4, 4, 8, 8, generator=gen)
    pred = noise + 0.4 * torch.randn(4, 4, 8, 8, generator=gen)
    timesteps = torch.tensor([0, 1, 500, 999], dtype=torch.int64)
    offset_noise = torch.randn(4, 4, 1, 1, generator=gen)
    ip_noise = torch.randn(4, 4, 8, 8, generator=gen)
    rs, draws = pyramid_draws(gen, noise, 6)

    sched = scheduler()
    all_timesteps = torch.arange(1000)
    out = {"latents": latents, "noise": noise, "pred": pred, "timesteps": timesteps,
           "offset_noise": offset_noise, "ip_noise": ip_noise,
           "pyramid.r": torch.tensor(rs, dtype=torch.float64),
           "alphas_cumprod": sched.alphas_cumprod.clone(),
           "snr": compute_snr(sched, all_timesteps).float()}
    for i, d in enumerate(draws):
        out[f"pyramid.draw{i}"] = d
    zt = scheduler()
    fix_zero_terminal_snr(zt)
    diffusers_zt = scheduler(rescale_betas_zero_snr=True)
    assert torch.allclose(zt.alphas_cumprod, diffusers_zt.alphas_cumprod, atol=1e-6)
    out["zt.alphas_cumprod"] = zt.alphas_cumprod.clone()

    out["noise.offset"] = apply_noise_offset(latents, noise, 0.0357, None, offset_noise)
    out["noise.offset_adaptive"] = apply_noise_offset(latents, noise, 0.0357, 0.5, offset_noise)
    out["noise.offset_clamped"] = apply_noise_offset(latents, noise, 0.0357, -10.0, offset_noise)
    out["noise.pyramid"] = pyramid_noise_like(noise, rs, draws, 0.3)
    out["noisy.ip"] = sched.add_noise(latents, noise + 0.1 * ip_noise, timesteps)

    out["huber_c.constant"] = huber_threshold("constant", timesteps, sched, 0.1, 2.0)
    out["huber_c.exponential"] = huber_threshold("exponential", timesteps, sched, 0.1, 2.0)
    out["huber_c.snr"] = huber_threshold("snr", timesteps, sched, 0.1, 2.0)
    for loss_type in ("l2", "l1", "huber", "smooth_l1"):
        out[f"loss.{loss_type}"] = conditional_loss(pred, noise, loss_type,
                                                    out["huber_c.snr"]).mean([1, 2, 3])
    snr_t = torch.stack([out["snr"][t] for t in timesteps])
    for option in ("min_snr5", "min_snr5_v", "scale_v", "v_pred_like0.5", "debiased",
                   "debiased_v"):
        out[f"weighted.{option}"] = post_process(out["loss.l2"], snr_t, option)
    meta = {"diffusers": diffusers.__version__, "torch": torch.__version__, "seed": str(SEED)}
    save_file({k: v.contiguous() for k, v in out.items()}, out_path, metadata=meta)


if __name__ == "__main__":
    main()
