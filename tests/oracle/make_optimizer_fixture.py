#!/usr/bin/env python3
"""Optimizer oracle: 20 steps of each optimizer kohya sd-scripts offers (train_util.get_optimizer)
over fixed gradients, run by the optimizers' own PyPI packages: torch.optim (AdamW, SGD),
lion-pytorch (Lion), transformers (Adafactor), prodigyopt (Prodigy), dadaptation (DAdaptAdam)
and schedulefree (AdamWScheduleFree).

The parameters are shaped as a LoRA's are: a lora_down [4, 8], a zero lora_up [8, 4] (kohya's
init, which exercises Prodigy's zero-p0 path and Adafactor's RMS floor), a LoCon conv lora_down
[4, 3, 3, 3] (Adafactor factors its last two dims) and a 1-D tensor [6] (not factored). They form
two parameter groups, as kohya's unet_lr / text_encoder_lr groups: the second group's lr is
`ratio` times the first's. Step t (1-based) uses the lr `lr * (1 - 0.03 (t - 1))` and the stored
gradient grad.<i>.<t>: a fixed direction plus noise.

Writes one safetensors file: init.<i>, grad.<i>.<t>, and per case <case>.param.<i>.<t> (the
parameters after step t; for schedule-free the train-mode y), plus <case>.eval.<i> for
schedule-free (its eval() weights after the last step) and <case>.lr.<t> (the lr kohya logs for
that step: d*lr for Prodigy / D-Adaptation, the AdafactorSchedule lr for Adafactor).
The case list (name, type, optimizer_args, lr, ratio) is stored as JSON in the metadata, so the
C++ test (tests/core/test_oracle_optimizer.cpp) builds each optimizer from the same arguments.

Usage: make_optimizer_fixture.py --output optimizers.safetensors
Needs: torch, transformers, lion-pytorch, prodigyopt, dadaptation, schedulefree, safetensors.
"""
import argparse
import json

import torch
from safetensors.torch import save_file

SHAPES = [(4, 8), (8, 4), (4, 3, 3, 3), (6,)]
STEPS = 20

# (case, kohya optimizer_type, optimizer_args as kohya passes them, lr, group-2 ratio)
CASES = [
    ("adamw", "AdamW", {"weight_decay": 0.01}, 1e-3, 0.5),
    ("adamw_betas", "AdamW", {"betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}, 1e-3, 1.0),
    ("lion", "Lion", {"weight_decay": 0.01}, 1e-4, 0.5),
    ("lion_betas", "Lion", {"betas": (0.95, 0.98)}, 3e-4, 1.0),
    ("sgd_nesterov", "SGDNesterov", {"momentum": 0.9, "weight_decay": 1e-4}, 0.1, 0.5),
    ("sgd", "SGD", {"momentum": 0.5, "dampening": 0.1, "weight_decay": 1e-3}, 0.05, 1.0),
    ("adafactor_relative", "AdaFactor",
     {"relative_step": True, "scale_parameter": True, "warmup_init": False}, 0.0, 1.0),
    ("adafactor_warmup_init", "AdaFactor",
     {"relative_step": True, "scale_parameter": True, "warmup_init": True}, 0.0, 1.0),
    ("adafactor_fixed", "AdaFactor",
     {"relative_step": False, "scale_parameter": False, "warmup_init": False, "beta1": 0.9,
      "weight_decay": 0.01}, 1e-3, 0.5),
    ("prodigy", "Prodigy", {"weight_decay": 0.01}, 1.0, 1.0),
    ("prodigy_options", "Prodigy",
     {"betas": (0.9, 0.99), "d_coef": 2.0, "decouple": False, "use_bias_correction": True,
      "safeguard_warmup": True, "weight_decay": 0.01}, 1.0, 1.0),
    ("prodigy_frozen_group", "Prodigy", {"weight_decay": 0.0}, 1.0, 0.0),
    ("dadapt_adam", "DAdaptAdam", {"decouple": True, "weight_decay": 0.01}, 1.0, 1.0),
    ("dadapt_adam_bias", "DAdaptAdam", {"use_bias_correction": True, "weight_decay": 0.01}, 1.0,
     1.0),
    ("schedulefree", "AdamWScheduleFree", {"warmup_steps": 5, "weight_decay": 0.01}, 1e-3, 0.5),
]


def make_optimizer(kind, groups, args, lr):
    if kind == "AdamW":
        return torch.optim.AdamW(groups, lr=lr, **args)
    if kind == "Lion":
        import lion_pytorch
        return lion_pytorch.Lion(groups, lr=lr, **args)
    if kind == "SGDNesterov":  # kohya: torch.optim.SGD(nesterov=True), momentum 0.9 by default
        return torch.optim.SGD(groups, lr=lr, nesterov=True, **args)
    if kind == "SGD":
        return torch.optim.SGD(groups, lr=lr, **args)
    if kind == "AdaFactor":  # kohya passes lr=None with relative_step
        import transformers.optimization
        return transformers.optimization.Adafactor(
            groups, lr=None if args["relative_step"] else lr, **args)
    if kind == "Prodigy":
        import prodigyopt
        return prodigyopt.Prodigy(groups, lr=lr, **args)
    if kind == "DAdaptAdam":
        import dadaptation
        return dadaptation.DAdaptAdam(groups, lr=lr, **args)
    if kind == "AdamWScheduleFree":
        import schedulefree
        return schedulefree.AdamWScheduleFree(groups, lr=lr, **args)
    raise ValueError(kind)


def logged_lr(kind, opt, lr):
    """The lr kohya's train_network logs for group 0 (generate_step_logs)."""
    group = opt.param_groups[0]
    if kind in ("Prodigy", "DAdaptAdam"):
        return group["d"] * group["lr"]
    if kind == "AdaFactor":  # transformers AdafactorSchedule.get_lr: the first param's lr
        state = opt.state[group["params"][0]]
        return float(opt._get_lr(group, state)) if state else lr
    return group["lr"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", required=True)
    out = ap.parse_args().output
    gen = torch.Generator().manual_seed(20261202)
    init = [torch.randn(s, generator=gen, dtype=torch.float32) * 0.1 for s in SHAPES]
    init[1].zero_()  # lora_up starts at zero, as kohya's LoRAModule
    # A steady direction plus noise, as a loss that keeps pulling one way: Prodigy's and
    # D-Adaptation's estimate d then grows from d0 (pure noise would leave it at d0).
    direction = [torch.randn(s, generator=gen, dtype=torch.float32) * 0.01 for s in SHAPES]
    grads = [[d + torch.randn(s, generator=gen, dtype=torch.float32) * 0.003
              for d, s in zip(direction, SHAPES)] for _ in range(STEPS)]
    tensors = {f"init.{i}": t.clone() for i, t in enumerate(init)}
    for t in range(STEPS):
        for i in range(len(SHAPES)):
            tensors[f"grad.{i}.{t + 1}"] = grads[t][i].clone()
    for case, kind, args, lr, ratio in CASES:
        params = [torch.nn.Parameter(t.clone()) for t in init]
        groups = [{"params": params[:2], "lr": lr}, {"params": params[2:], "lr": lr * ratio}]
        opt = make_optimizer(kind, groups, dict(args), lr)
        if kind == "AdamWScheduleFree":
            opt.train()
        for t in range(STEPS):
            step_lr = lr * (1 - 0.03 * t)
            if kind not in ("AdaFactor",) or not args.get("relative_step"):
                opt.param_groups[0]["lr"] = step_lr
                opt.param_groups[1]["lr"] = step_lr * ratio
            for i, p in enumerate(params):
                p.grad = grads[t][i].clone()
            opt.step()
            for i, p in enumerate(params):
                tensors[f"{case}.param.{i}.{t + 1}"] = p.detach().clone()
            tensors[f"{case}.lr.{t + 1}"] = torch.tensor(logged_lr(kind, opt, step_lr),
                                                         dtype=torch.float64)
        if kind == "AdamWScheduleFree":
            opt.eval()
            for i, p in enumerate(params):
                tensors[f"{case}.eval.{i}"] = p.detach().clone()
    cases = [{"case": c, "optimizer_type": k,
              "optimizer_args": [f"{a}={v[0]},{v[1]}" if isinstance(v, tuple) else f"{a}={v}"
                                 for a, v in args.items()],
              "lr": lr, "ratio": ratio} for c, k, args, lr, ratio in CASES]
    save_file(tensors, out, metadata={"cases": json.dumps(cases), "steps": str(STEPS)})


if __name__ == "__main__":
    main()
