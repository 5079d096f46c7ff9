"""diffusers' DDPM forward process and v-prediction target on fixed inputs (SD2-v / v-pred).

v-prediction does not change the UNet forward; its parity is the training target. For fixed
x0, noise and timesteps (torch seed below) this records, from
DDPMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
num_train_timesteps=1000, prediction_type="v_prediction"):
  sched.x0 [4,4,4,4]  sched.noise [4,4,4,4]  sched.t [4] int64 (0, 1, 500, 999)
  sched.noisy    = add_noise(x0, noise, t)       sqrt(abar) x0 + sqrt(1-abar) noise
  sched.velocity = get_velocity(x0, noise, t)    sqrt(abar) noise - sqrt(1-abar) x0
into tests/fixtures/oracle/ddpm_v_prediction.safetensors, compared by
tests/core/test_oracle_schedule.cpp (atol 1e-6) with lorafleet's DDPMNoiseSchedule.

Run: tests/oracle/regen.sh (or: python make_schedule_fixture.py --output FILE).
"""
import argparse
import os

import torch
from diffusers import DDPMScheduler
from safetensors.torch import save_file

SEED = 777


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    sched = DDPMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                          num_train_timesteps=1000, prediction_type="v_prediction")
    g = torch.Generator().manual_seed(SEED)
    x0 = torch.randn(4, 4, 4, 4, generator=g)
    noise = torch.randn(4, 4, 4, 4, generator=g)
    t = torch.tensor([0, 1, 500, 999], dtype=torch.int64)
    out = {"sched.x0": x0, "sched.noise": noise, "sched.t": t,
           "sched.noisy": sched.add_noise(x0, noise, t),
           "sched.velocity": sched.get_velocity(x0, noise, t)}
    save_file({k: v.contiguous() for k, v in out.items()}, args.output,
              metadata={"generator": "tests/oracle/make_schedule_fixture.py", "seed": str(SEED),
                        "scheduler": "DDPMScheduler scaled_linear 0.00085..0.012 T=1000 "
                                     "v_prediction"})
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
