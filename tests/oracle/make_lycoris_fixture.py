#!/usr/bin/env python3
"""LyCORIS oracle: LoHa modules loaded from kohya-named tensors by lycoris-lora's own loader
(LohaModule.extract_state_dict + make_module_from_state_dict, as lycoris.kohya's
create_network_from_weights builds each module), then run forward on fixed inputs.

Cases, each a torch layer with fixed weights under a kohya module name:
  linear: nn.Linear(16, 12) [3, 5, 16] input (a text-encoder / attention projection), rank 4,
          alpha 2 (scale 0.5), multiplier 1;
  conv1:  nn.Conv2d(6, 8, 1) (SD1 proj_in), rank 2, alpha 0 (LyCORIS: the rank, scale 1);
  conv3:  nn.Conv2d(6, 8, 3, stride=2, padding=1) (a Downsample conv), rank 3, alpha 1.5,
          multiplier 0.75.
All four hada_* factors are drawn non-zero, so delta W is not 0.

Writes one safetensors file; per case <case>.weight / .bias (the layer), <case>.x (input),
<case>.y (LyCORIS's output), and the adapter as the file stores it:
<case>.lora.<lora_name>.hada_w1_a / hada_w1_b / hada_w2_a / hada_w2_b / alpha. Metadata:
"cases" JSON [{case, lora_name, kind, stride, padding, multiplier}], lycoris-lora's version.

Usage: make_lycoris_fixture.py --output lycoris_loha.safetensors
Needs: torch, lycoris-lora, safetensors.
"""
import argparse
import importlib.metadata
import json

import torch
import torch.nn as nn
from lycoris.modules.loha import LohaModule
from safetensors.torch import save_file

# (case, kohya lora_name, layer factory, input shape, rank, alpha, multiplier)
CASES = [
    ("linear", "lora_te_text_model_encoder_layers_0_self_attn_q_proj",
     lambda: nn.Linear(16, 12), (3, 5, 16), 4, 2.0, 1.0),
    ("conv1", "lora_unet_down_blocks_0_attentions_0_proj_in",
     lambda: nn.Conv2d(6, 8, 1), (2, 6, 5, 5), 2, 0.0, 1.0),
    ("conv3", "lora_unet_down_blocks_0_downsamplers_0_conv",
     lambda: nn.Conv2d(6, 8, 3, stride=2, padding=1), (2, 6, 7, 7), 3, 1.5, 0.75),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(20261202)
    out, cases = {}, []
    for case, name, make, x_shape, rank, alpha, multiplier in CASES:
        layer = make()
        with torch.no_grad():
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) * 0.2)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen) * 0.1)
        out_dim = layer.weight.shape[0]
        fan_in = layer.weight[0].numel()
        sd = {
            f"{name}.hada_w1_a": torch.randn(out_dim, rank, generator=gen) * 0.3,
            f"{name}.hada_w1_b": torch.randn(rank, fan_in, generator=gen),
            f"{name}.hada_w2_a": torch.randn(out_dim, rank, generator=gen) * 0.3,
            f"{name}.hada_w2_b": torch.randn(rank, fan_in, generator=gen),
            f"{name}.alpha": torch.tensor(alpha),
        }
        x = torch.randn(x_shape, generator=gen)
        with torch.no_grad():
            module = LohaModule.make_module_from_state_dict(
                name, layer, *LohaModule.extract_state_dict(sd, name))
            module.multiplier = multiplier
            module.apply_to()
            module.eval()
            y = layer(x)  # apply_to replaced the layer's forward with LohaModule.forward
        out[f"{case}.weight"] = layer.weight.detach().clone()
        out[f"{case}.bias"] = layer.bias.detach().clone()
        out[f"{case}.x"] = x
        out[f"{case}.y"] = y.detach().clone()
        for k, v in sd.items():
            out[f"{case}.lora.{k}"] = v.contiguous()
        conv = isinstance(layer, nn.Conv2d)
        cases.append({"case": case, "lora_name": name, "kind": "conv" if conv else "linear",
                      "stride": layer.stride[0] if conv else 1,
                      "padding": layer.padding[0] if conv else 0, "multiplier": multiplier})
    meta = {"cases": json.dumps(cases), "lycoris_lora": importlib.metadata.version("lycoris-lora"),
            "torch": torch.__version__}
    save_file(out, args.output, metadata=meta)


if __name__ == "__main__":
    main()
