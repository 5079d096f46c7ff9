#!/usr/bin/env python3
"""OFT oracle: kohya networks.oft's rotation of a layer, computed by lycoris-lora's diag-OFT code.

kohya sd-scripts is not a PyPI package, so its networks/oft.py cannot be imported here. lycoris-lora
implements the same operator for its diag-oft algorithm: Q = B - B^T bounded in Frobenius norm by
constraint = alpha * out_dim, the Cayley transform R = (I + Q)(I - Q)^-1 in float32, and the
rotated weight einsum("k n m, k n ... -> k m ...", R, W) over blocks of output rows, the bias
left alone. (It rescales by constraint / (||Q|| + 1e-8) where kohya uses (constraint + 1e-8) /
(||Q|| + 1e-8): a relative 1e-8 / constraint, below 1e-6 for every case here.)

Cases, each a torch layer with fixed weights under its kohya networks.oft module name, oft_blocks
drawn non-zero:
  attn_q:   Linear(16, 16, bias=False) (CrossAttention to_q), 4 blocks of 4, alpha 1e-3
            (constraint 0.016, below ||Q||: the bound acts), multiplier 1;
  attn_out: Linear(24, 24) with bias (to_out.0), 3 blocks of 8, alpha 0.05 (constraint 1.2,
            above ||Q||: no rescaling), multiplier 1;
  conv3:    Conv2d(6, 8, 3, stride=2, padding=1) (a ResnetBlock2D conv, enable_conv), 2 blocks of
            4, alpha 0.01 (bound acts), multiplier 1;
  conv1:    Conv2d(6, 8, 1) (SD1 proj_in, enable_all_linear), 4 blocks of 2, alpha 0.05,
            multiplier 0.5 (R' = 0.5 (R - I) + I: lycoris DiagOFTModule.make_weight(scale=0.5),
            whose factorization(8, 2) gives the same 4 blocks of 2).
Multiplier-1 cases use lycoris.functional.diag_oft.diff_weight (backend torch) for the rotated
weight W + (R - I) W.

Writes one safetensors file; per case <case>.weight / .bias (the layer), <case>.x (input),
<case>.y (the rotated layer's output), <case>.g (a cotangent) and <case>.grad (d sum(y g) /
d oft_blocks), and the module as kohya saves it: <case>.lora.<oft_name>.oft_blocks / .alpha.
Metadata: "cases" JSON [{case, oft_name, kind, stride, padding, multiplier}], lycoris-lora's
version.

Usage: make_oft_fixture.py --output oft.safetensors
Needs: torch, lycoris-lora, safetensors.
"""
import argparse
import importlib.metadata
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from lycoris.functional.diag_oft import diff_weight
from lycoris.modules.diag_oft import DiagOFTModule
from safetensors.torch import save_file

PREFIX = "oft_unet_down_blocks_0_"
# (case, kohya oft_name, layer factory, input shape, blocks, alpha, multiplier)
CASES = [
    ("attn_q", PREFIX + "attentions_0_transformer_blocks_0_attn1_to_q",
     lambda: nn.Linear(16, 16, bias=False), (3, 5, 16), 4, 1e-3, 1.0),
    ("attn_out", PREFIX + "attentions_0_transformer_blocks_0_attn2_to_out_0",
     lambda: nn.Linear(24, 24), (3, 5, 24), 3, 0.05, 1.0),
    ("conv3", PREFIX + "resnets_0_conv1",
     lambda: nn.Conv2d(6, 8, 3, stride=2, padding=1), (2, 6, 7, 7), 2, 0.01, 1.0),
    ("conv1", PREFIX + "attentions_0_proj_in",
     lambda: nn.Conv2d(6, 8, 1), (2, 6, 5, 5), 4, 0.05, 0.5),
]


def rotated_weight(layer, blocks, alpha, multiplier):
    """(R W at `multiplier`, the leaf tensor of the blocks it is differentiable in)."""
    out_dim = layer.weight.shape[0]
    leaf = blocks.clone().requires_grad_(True)
    if multiplier == 1.0:
        return layer.weight + diff_weight(layer.weight, leaf, None, constraint=alpha * out_dim,
                                          backend="torch"), leaf
    module = DiagOFTModule("m", layer, multiplier, lora_dim=blocks.shape[1], constraint=alpha)
    assert module.block_num == blocks.shape[0] and module.block_size == blocks.shape[1]
    module.oft_blocks = nn.Parameter(blocks.clone())
    return module.make_weight(scale=multiplier), module.oft_blocks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(20261203)
    out, cases = {}, []
    for case, name, make, x_shape, k, alpha, multiplier in CASES:
        layer = make().requires_grad_(False)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) * 0.2)
            if layer.bias is not None:
                layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen) * 0.1)
        out_dim = layer.weight.shape[0]
        b = out_dim // k
        blocks = torch.randn(k, b, b, generator=gen) * 0.05
        x = torch.randn(x_shape, generator=gen)
        w, leaf = rotated_weight(layer, blocks, alpha, multiplier)
        conv = isinstance(layer, nn.Conv2d)
        if conv:
            y = F.conv2d(x, w, layer.bias, layer.stride, layer.padding)
        else:
            y = F.linear(x, w, layer.bias)
        g = torch.randn(y.shape, generator=gen)
        (grad,) = torch.autograd.grad((y * g).sum(), leaf)
        out[f"{case}.weight"] = layer.weight.detach().clone()
        if layer.bias is not None:
            out[f"{case}.bias"] = layer.bias.detach().clone()
        out[f"{case}.x"] = x
        out[f"{case}.y"] = y.detach().clone()
        out[f"{case}.g"] = g
        out[f"{case}.grad"] = grad.detach().clone()
        out[f"{case}.lora.{name}.oft_blocks"] = blocks
        out[f"{case}.lora.{name}.alpha"] = torch.tensor(alpha)  # kohya: register_buffer("alpha")
        cases.append({"case": case, "oft_name": name, "kind": "conv" if conv else "linear",
                      "stride": layer.stride[0] if conv else 1,
                      "padding": layer.padding[0] if conv else 0, "multiplier": multiplier,
                      "norm_q": float((blocks - blocks.transpose(1, 2)).norm()),
                      "constraint": alpha * out_dim})
    meta = {"cases": json.dumps(cases), "lycoris_lora": importlib.metadata.version("lycoris-lora"),
            "torch": torch.__version__}
    save_file({k: v.contiguous() for k, v in out.items()}, args.output, metadata=meta)


if __name__ == "__main__":
    main()
