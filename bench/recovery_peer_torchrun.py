#!/usr/bin/env python3
"""Peer of bench/recovery_bench.py: a tiny LoRA-style DDP training script for `torchrun`.

Follows the torchrun elastic convention (https://pytorch.org/docs/stable/elastic/train_script.html):
on every start, load the newest checkpoint if one exists, then train; torchrun restarts the whole
worker group when a worker dies (`--max-restarts`). Gloo backend, CPU.

Model: a small conv UNet (channels 48/160: conv_in, 2 down levels with residual blocks, a mid
block, 2 up levels with skip connections, conv_out; latents 4x16x16 as for 128 px images) whose
1,078,468 base parameters are frozen, plus rank-4 LoRA adapters (down conv with the base conv's
kernel to r channels, 1x1 up conv, zero-initialised up) on all 16 convs: 51,488 trainable
parameters. That is about the size of lorafleet's "tiny" preset (UNet 1,077,572, LoRA R 4 48,640),
without its attention and text conditioning. AdamW over the LoRA
parameters, MSE to the noise. Batch 2 per rank of random latents drawn from (seed, step, rank).

Checkpoint every --save-every steps: rank 0 writes `step-NNNNNN.pt` (step, LoRA state, optimizer
state) with torch.save to a temp file + os.replace, keeps the newest --keep. Output (rank 0):
`start restart=K pid=P` before importing torch, `resumed from step N` (or `fresh start`) once the
process group is up and the checkpoint is loaded, then `step N` after each completed step. Each
rank writes its pid to `<ckpt-dir>/pid.rank<R>.restart<K>`.
"""
import os
import sys

RANK = int(os.environ.get("RANK", "0"))
RESTART = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
if RANK == 0:
    print(f"start restart={RESTART} pid={os.getpid()}", flush=True)

import argparse  # noqa: E402
import glob  # noqa: E402
import re  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


class LoRAConv(nn.Module):
    """Frozen conv + rank-r adapter: up(down(x)) * alpha / r, up zero-initialised (kohya style)."""

    def __init__(self, cin, cout, k, stride=1, r=4, alpha=4.0):
        super().__init__()
        self.base = nn.Conv2d(cin, cout, k, stride, k // 2)
        self.base.requires_grad_(False)
        self.down = nn.Conv2d(cin, r, k, stride, k // 2, bias=False)
        self.up = nn.Conv2d(r, cout, 1, bias=False)
        nn.init.kaiming_uniform_(self.down.weight, a=5 ** 0.5)
        nn.init.zeros_(self.up.weight)
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.up(self.down(x)) * self.scale


class ResBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.n1 = nn.GroupNorm(8, cin)
        self.c1 = LoRAConv(cin, cout, 3)
        self.n2 = nn.GroupNorm(8, cout)
        self.c2 = LoRAConv(cout, cout, 3)
        self.skip = LoRAConv(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(F.silu(self.n2(h)))
        return self.skip(x) + h


class TinyUNet(nn.Module):
    def __init__(self, c=(48, 160), cin=4):
        super().__init__()
        self.conv_in = LoRAConv(cin, c[0], 3)
        self.d1 = ResBlock(c[0], c[0])
        self.ds1 = LoRAConv(c[0], c[0], 3, stride=2)
        self.d2 = ResBlock(c[0], c[1])
        self.mid = ResBlock(c[1], c[1])
        self.u2 = ResBlock(c[1] + c[1], c[0])
        self.u1 = ResBlock(c[0] + c[0], c[0])
        self.n_out = nn.GroupNorm(8, c[0])
        self.conv_out = LoRAConv(c[0], cin, 3)
        for m in self.modules():
            if isinstance(m, nn.GroupNorm):
                m.requires_grad_(False)

    def forward(self, x):
        h0 = self.d1(self.conv_in(x))  # 16x16
        h1 = self.d2(self.ds1(h0))  # 8x8
        h = self.mid(h1)
        h = self.u2(torch.cat([h, h1], 1))
        h = F.interpolate(h, scale_factor=2.0, mode="nearest")
        h = self.u1(torch.cat([h, h0], 1))
        return self.conv_out(F.silu(self.n_out(h)))


def checkpoints(d):
    found = []
    for p in glob.glob(os.path.join(d, "step-*.pt")):
        m = re.fullmatch(r"step-(\d+)\.pt", os.path.basename(p))
        if m:
            found.append((int(m.group(1)), p))
    return sorted(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ckpt-dir", required=True)
    ap.add_argument("--max-steps", type=int, default=40)
    ap.add_argument("--save-every", type=int, default=2)
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--latent", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-4)
    args = ap.parse_args()
    os.makedirs(args.ckpt_dir, exist_ok=True)
    with open(os.path.join(args.ckpt_dir, f"pid.rank{RANK}.restart{RESTART}"), "w") as f:
        f.write(str(os.getpid()))

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)  # same frozen base and LoRA init on every rank
    model = TinyUNet()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr)
    step = 0
    ckpts = checkpoints(args.ckpt_dir)
    if ckpts:
        state = torch.load(ckpts[-1][1], map_location="cpu", weights_only=True)
        model.load_state_dict(state["lora"], strict=False)
        opt.load_state_dict(state["optim"])
        step = state["step"]
    ddp = DDP(model)
    if rank == 0:
        if ckpts:
            print(f"resumed from step {step} restart={RESTART}", flush=True)
        else:
            n_base = sum(p.numel() for p in model.parameters() if not p.requires_grad)
            n_lora = sum(p.numel() for p in params)
            print(f"fresh start restart={RESTART} base_params={n_base} lora_params={n_lora}",
                  flush=True)

    while step < args.max_steps:
        g = torch.Generator().manual_seed(args.seed * 100003 + step * world + rank)
        x = torch.randn(args.batch, 4, args.latent, args.latent, generator=g)
        noise = torch.randn(x.shape, generator=g)
        t = torch.rand(args.batch, 1, 1, 1, generator=g)
        noisy = (1 - t).sqrt() * x + t.sqrt() * noise
        loss = F.mse_loss(ddp(noisy), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if rank == 0:
            print(f"step {step} loss {loss.item():.5f}", flush=True)
            if step % args.save_every == 0:
                lora = {k: v for k, v in model.state_dict().items()
                        if ".down." in k or ".up." in k}
                path = os.path.join(args.ckpt_dir, f"step-{step:06d}.pt")
                tmp = path + ".tmp"
                torch.save({"step": step, "lora": lora, "optim": opt.state_dict()}, tmp)
                os.replace(tmp, path)
                for _, old in checkpoints(args.ckpt_dir)[:-args.keep]:
                    os.remove(old)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
