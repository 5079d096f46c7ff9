"""Every kohya LR schedule at every step, from transformers / diffusers as kohya builds them.

Each case gives kohya's arguments (lr_scheduler, learning_rate, max_train_steps,
lr_warmup_steps as an int, a ratio or a percentage, lr_decay_steps, lr_scheduler_num_cycles,
lr_scheduler_power, lr_scheduler_timescale, lr_scheduler_min_lr_ratio, lr_scheduler_args).
They are turned into scheduler arguments as kohya sd-scripts' get_scheduler_fix does
(library/train_util.py: warmup and decay ratios -> int(ratio * total), num_cycles for
cosine_with_restarts, num_cycles / 2 for cosine_with_min_lr and warmup_stable_decay,
num_stable_steps = total - warmup - decay, min_lr_ratio 0 when unset for warmup_stable_decay,
piecewise_constant from diffusers with its step_rules), with num_processes 1 (lorafleet counts
optimizer steps). The lr before each of the max_train_steps + 1 optimizer steps is recorded
from a LambdaLR on an SGD optimizer with lr = learning_rate:

  tests/fixtures/oracle/lr_schedules.json = {"versions": {...}, "cases": [{"name", "args",
      "lrs": [lr(0), ..., lr(N)]}]}

tests/worker/test_lr_schedule_oracle.cpp writes each case's args as the job YAML's training
keys, parses them (common/config), builds the schedule (worker/train/lr_schedule_setup) and
compares lr_at_step at every step (relative 1e-12).

Run: tests/oracle/regen.sh (or: python make_lr_schedule_fixture.py --output FILE).
"""
import argparse
import ast
import json

import diffusers
import torch
import transformers
from diffusers.optimization import get_piecewise_constant_schedule
from transformers.optimization import SchedulerType, TYPE_TO_SCHEDULER_FUNCTION

N = 1000
CASES = [
    ("constant", {"lr_scheduler": "constant"}),
    ("constant_with_warmup", {"lr_scheduler": "constant_with_warmup", "lr_warmup_steps": 100}),
    ("constant_with_warmup_ratio",
     {"lr_scheduler": "constant_with_warmup", "lr_warmup_steps": 0.1}),
    ("linear", {"lr_scheduler": "linear"}),
    ("linear_warmup_percent", {"lr_scheduler": "linear", "lr_warmup_steps": "5%"}),
    ("cosine", {"lr_scheduler": "cosine"}),
    ("cosine_warmup", {"lr_scheduler": "cosine", "lr_warmup_steps": 100}),
    ("cosine_warmup_ratio_floor", {"lr_scheduler": "cosine", "lr_warmup_steps": 0.1234,
                                   "max_train_steps": 999}),
    ("cosine_with_restarts", {"lr_scheduler": "cosine_with_restarts", "lr_warmup_steps": 50,
                              "lr_scheduler_num_cycles": 3}),
    ("polynomial", {"lr_scheduler": "polynomial", "lr_warmup_steps": 100,
                    "lr_scheduler_power": 2.0}),
    ("polynomial_lr_end", {"lr_scheduler": "polynomial", "lr_scheduler_power": 0.5,
                           "lr_scheduler_args": ["lr_end=1e-6"]}),
    ("inverse_sqrt", {"lr_scheduler": "inverse_sqrt", "lr_warmup_steps": 100}),
    ("inverse_sqrt_timescale", {"lr_scheduler": "inverse_sqrt", "lr_scheduler_timescale": 500}),
    ("inverse_sqrt_no_warmup", {"lr_scheduler": "inverse_sqrt"}),
    ("cosine_with_min_lr", {"lr_scheduler": "cosine_with_min_lr", "lr_warmup_steps": 100,
                            "lr_scheduler_min_lr_ratio": 0.1}),
    ("cosine_with_min_lr_abs", {"lr_scheduler": "cosine_with_min_lr",
                                "lr_scheduler_num_cycles": 2,
                                "lr_scheduler_args": ["min_lr=2e-5"]}),
    ("warmup_stable_decay", {"lr_scheduler": "warmup_stable_decay", "lr_warmup_steps": 100,
                             "lr_decay_steps": 0.2, "lr_scheduler_min_lr_ratio": 0.05}),
    ("warmup_stable_decay_types",
     {"lr_scheduler": "warmup_stable_decay", "lr_warmup_steps": "10%", "lr_decay_steps": 300,
      "lr_scheduler_args": ["warmup_type='cosine'", "decay_type=\"1-sqrt\""]}),
    ("piecewise_constant", {"lr_scheduler": "piecewise_constant",
                            "lr_scheduler_args": ["step_rules='1:100,0.5:500,0.1:800,0.05'"]}),
    ("cosine_num_cycles_arg", {"lr_scheduler": "cosine", "lr_warmup_steps": 50,
                               "lr_scheduler_args": ["num_cycles=1.5"]}),
    ("piecewise_constant_repeated_step",
     {"lr_scheduler": "piecewise_constant",
      "lr_scheduler_args": ["step_rules='1:100,0.5:100,0.2:300,0.1'"]}),
]


def int_or_float(value):
    """kohya's argparse type of lr_warmup_steps / lr_decay_steps."""
    if isinstance(value, str):
        if value.endswith("%"):
            return float(value[:-1]) / 100.0
        return int(value) if float(value) >= 1 else float(value)
    return value


def build(args, optimizer):
    """kohya get_scheduler_fix with num_processes 1."""
    name = args["lr_scheduler"]
    total = args.get("max_train_steps", N)
    warmup = int_or_float(args.get("lr_warmup_steps", 0))
    decay = int_or_float(args.get("lr_decay_steps", 0))
    warmup = int(warmup * total) if isinstance(warmup, float) else warmup
    decay = int(decay * total) if isinstance(decay, float) else decay
    cycles = args.get("lr_scheduler_num_cycles", 1)
    min_lr_ratio = args.get("lr_scheduler_min_lr_ratio")
    kwargs = {}
    for arg in args.get("lr_scheduler_args", []):
        key, value = arg.split("=")
        kwargs[key] = ast.literal_eval(value)
    if name == "piecewise_constant":
        return get_piecewise_constant_schedule(optimizer, **kwargs)
    fn = TYPE_TO_SCHEDULER_FUNCTION[SchedulerType(name)]
    if name == "constant":
        return fn(optimizer, **kwargs)
    if name == "constant_with_warmup":
        return fn(optimizer, num_warmup_steps=warmup, **kwargs)
    if name == "inverse_sqrt":
        return fn(optimizer, num_warmup_steps=warmup,
                  timescale=args.get("lr_scheduler_timescale"), **kwargs)
    if name == "cosine_with_restarts":
        return fn(optimizer, num_warmup_steps=warmup, num_training_steps=total,
                  num_cycles=cycles, **kwargs)
    if name == "polynomial":
        return fn(optimizer, num_warmup_steps=warmup, num_training_steps=total,
                  power=args.get("lr_scheduler_power", 1.0), **kwargs)
    if name == "cosine_with_min_lr":
        return fn(optimizer, num_warmup_steps=warmup, num_training_steps=total,
                  num_cycles=cycles / 2, min_lr_rate=min_lr_ratio, **kwargs)
    if name in ("linear", "cosine"):
        return fn(optimizer, num_warmup_steps=warmup, num_training_steps=total, **kwargs)
    assert name == "warmup_stable_decay", name
    return fn(optimizer, num_warmup_steps=warmup, num_stable_steps=total - warmup - decay,
              num_decay_steps=decay, num_cycles=cycles / 2,
              min_lr_ratio=min_lr_ratio if min_lr_ratio is not None else 0.0, **kwargs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", required=True)
    out_path = ap.parse_args().output
    cases = []
    for name, args in CASES:
        args = {"learning_rate": 1e-4, "max_train_steps": N, **args}
        p = torch.nn.Parameter(torch.zeros(1))
        optimizer = torch.optim.SGD([p], lr=args["learning_rate"])
        sched = build(args, optimizer)
        lrs = []
        for _ in range(args["max_train_steps"] + 1):
            lrs.append(sched.get_last_lr()[0])
            optimizer.step()
            sched.step()
        cases.append({"name": name, "args": args, "lrs": lrs})
    fixture = {"versions": {"transformers": transformers.__version__,
                            "diffusers": diffusers.__version__, "torch": torch.__version__},
               "cases": cases}
    with open(out_path, "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
