#!/usr/bin/env python3
"""LyCORIS oracle: LoHa / LoKr modules loaded from kohya-named tensors by lycoris-lora's own
loader (<Module>.extract_state_dict + make_module_from_state_dict, as lycoris.kohya's
create_network_from_weights builds each module), then run forward on fixed inputs.

--algo loha cases, each a torch layer with fixed weights under a kohya module name:
  linear: nn.Linear(16, 12) [3, 5, 16] input (a text-encoder / attention projection), rank 4,
          alpha 2 (scale 0.5), multiplier 1;
  conv1:  nn.Conv2d(6, 8, 1) (SD1 proj_in), rank 2, alpha 0 (LyCORIS: the rank, scale 1);
  conv3:  nn.Conv2d(6, 8, 3, stride=2, padding=1) (a Downsample conv), rank 3, alpha 1.5,
          multiplier 0.75.
All four hada_* factors are drawn non-zero, so delta W is not 0.

--algo lokr: LokrModule(layer, lora_dim, alpha, factor, decompose_both) lays out the factors (its
init shapes are the fixture's lokr_* shapes, so the C++ test checks lorafleet's layout against
them), then every factor is redrawn non-zero:
  linear:      Linear(64, 48), rank 4, alpha 2, factor 4: lokr_w1 [4, 4], lokr_w2_a/_b;
  linear_both: Linear(64, 96), rank 2, alpha 1, factor 8, decompose_both: lokr_w1_a/_b, w2_a/_b;
  conv3:       Conv2d(16, 24, 3, stride 2, padding 1), rank 2, alpha 1.5, multiplier 0.75:
               lokr_w1, lokr_w2_a [6, 2], lokr_w2_b [2, 36];
  conv3_full:  Conv2d(6, 8, 3, padding 1), rank 4, alpha 2: lokr_w1, lokr_w2 [4, 3, 3, 3]
               (both halves full: LyCORIS's scale 1);
  conv1:       Conv2d(6, 8, 1) (SD1 proj_in), rank 1, alpha 0.5: lokr_w1, lokr_w2_a/_b.

--algo dora: LyCORIS dora_wd (weight_decompose, wd_on_output) on LoConModule (LyCORIS's algo
lora, kohya lora_down / lora_up keys) and LohaModule, dora_scale the layer's row norms times
(1 + N(0, 0.1^2)) so the magnitude differs from the merged weight's:
  locon_linear: Linear(16, 12), rank 4, alpha 2, multiplier 1;
  locon_conv3:  Conv2d(6, 8, 3, stride=2, padding=1), rank 2, alpha 1.5, multiplier 0.75 (the
                multiplier blend of weight_decompose);
  loha_linear:  Linear(16, 12), LoHa rank 4, alpha 2.

Writes one safetensors file; per case <case>.weight / .bias (the layer), <case>.x (input),
<case>.y (LyCORIS's output), and the adapter as the file stores it:
<case>.lora.<lora_name>.hada_w1_a / hada_w1_b / hada_w2_a / hada_w2_b / alpha. Metadata:
"cases" JSON [{case, lora_name, kind, stride, padding, multiplier (, rank, factor,
decompose_both)}], lycoris-lora's version.

Usage: make_lycoris_fixture.py --algo loha|lokr|dora --output lycoris_<algo>.safetensors
Needs: torch, lycoris-lora, safetensors.
"""
import argparse
import importlib.metadata
import json

import torch
import torch.nn as nn
from lycoris.modules.locon import LoConModule
from lycoris.modules.loha import LohaModule
from lycoris.modules.lokr import LokrModule
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


# (case, kohya lora_name, layer factory, input shape, rank, alpha, multiplier, factor,
#  decompose_both)
LOKR_CASES = [
    ("linear", "lora_te_text_model_encoder_layers_0_mlp_fc1",
     lambda: nn.Linear(64, 48), (3, 5, 64), 4, 2.0, 1.0, 4, False),
    ("linear_both", "lora_te_text_model_encoder_layers_0_mlp_fc2",
     lambda: nn.Linear(64, 96), (3, 5, 64), 2, 1.0, 1.0, 8, True),
    ("conv3", "lora_unet_down_blocks_0_downsamplers_0_conv",
     lambda: nn.Conv2d(16, 24, 3, stride=2, padding=1), (2, 16, 7, 7), 2, 1.5, 0.75, -1, False),
    ("conv3_full", "lora_unet_down_blocks_0_resnets_0_conv1",
     lambda: nn.Conv2d(6, 8, 3, padding=1), (2, 6, 5, 5), 4, 2.0, 1.0, -1, False),
    ("conv1", "lora_unet_down_blocks_0_attentions_0_proj_in",
     lambda: nn.Conv2d(6, 8, 1), (2, 6, 5, 5), 1, 0.5, 1.0, -1, False),
]


# (case, kohya lora_name, layer factory, input shape, rank, alpha, multiplier, module class)
DORA_CASES = [
    ("locon_linear", "lora_te_text_model_encoder_layers_0_self_attn_q_proj",
     lambda: nn.Linear(16, 12), (3, 5, 16), 4, 2.0, 1.0, "locon"),
    ("locon_conv3", "lora_unet_down_blocks_0_downsamplers_0_conv",
     lambda: nn.Conv2d(6, 8, 3, stride=2, padding=1), (2, 6, 7, 7), 2, 1.5, 0.75, "locon"),
    ("loha_linear", "lora_te_text_model_encoder_layers_0_self_attn_k_proj",
     lambda: nn.Linear(16, 12), (3, 5, 16), 4, 2.0, 1.0, "loha"),
]


def dora_state(name, layer, rank, alpha, kind, gen):
    """The module's own keys with weight_decompose, every tensor redrawn (dora_scale near the
    row norms)."""
    cls = LoConModule if kind == "locon" else LohaModule
    module = cls(name, layer, 1.0, rank, alpha, weight_decompose=True)
    sd = {}
    for k, v in module.state_dict().items():
        if k == "alpha":
            sd[f"{name}.alpha"] = torch.tensor(alpha)
        elif k == "dora_scale":
            sd[f"{name}.{k}"] = v.detach() * (1 + 0.1 * torch.randn(v.shape, generator=gen))
        else:
            sd[f"{name}.{k}"] = torch.randn(v.shape, generator=gen) * 0.3
    return sd, cls


def loha_state(name, layer, rank, alpha, gen):
    out_dim = layer.weight.shape[0]
    fan_in = layer.weight[0].numel()
    return {
        f"{name}.hada_w1_a": torch.randn(out_dim, rank, generator=gen) * 0.3,
        f"{name}.hada_w1_b": torch.randn(rank, fan_in, generator=gen),
        f"{name}.hada_w2_a": torch.randn(out_dim, rank, generator=gen) * 0.3,
        f"{name}.hada_w2_b": torch.randn(rank, fan_in, generator=gen),
        f"{name}.alpha": torch.tensor(alpha),
    }


def lokr_state(name, layer, rank, alpha, factor, decompose_both, gen):
    """LokrModule's own layout for these options, every factor redrawn non-zero."""
    module = LokrModule(name, layer, 1.0, lora_dim=rank, alpha=alpha, factor=factor,
                        decompose_both=decompose_both)
    sd = {}
    for k, v in module.custom_state_dict().items():
        if k == "alpha":
            sd[f"{name}.alpha"] = torch.tensor(alpha)  # as given; LyCORIS forces full ones to 1
        else:
            sd[f"{name}.{k}"] = torch.randn(v.shape, generator=gen) * 0.3
    return sd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--algo", choices=["loha", "lokr", "dora"], default="loha")
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(20261202)
    out, cases = {}, []
    module_class = LohaModule if args.algo == "loha" else LokrModule
    all_cases = {"loha": CASES, "lokr": LOKR_CASES, "dora": DORA_CASES}[args.algo]
    for case, name, make, x_shape, rank, alpha, multiplier, *lokr in all_cases:
        layer = make()
        with torch.no_grad():
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) * 0.2)
            layer.bias.copy_(torch.randn(layer.bias.shape, generator=gen) * 0.1)
        if args.algo == "loha":
            sd = loha_state(name, layer, rank, alpha, gen)
        elif args.algo == "dora":
            sd, module_class = dora_state(name, layer, rank, alpha, lokr[0], gen)
            lokr = []
        else:
            sd = lokr_state(name, layer, rank, alpha, lokr[0], lokr[1], gen)
        x = torch.randn(x_shape, generator=gen)
        with torch.no_grad():
            module = module_class.make_module_from_state_dict(
                name, layer, *module_class.extract_state_dict(sd, name))
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
        entry = {"case": case, "lora_name": name, "kind": "conv" if conv else "linear",
                 "stride": layer.stride[0] if conv else 1,
                 "padding": layer.padding[0] if conv else 0, "multiplier": multiplier}
        if lokr:
            entry.update({"rank": rank, "factor": lokr[0], "decompose_both": lokr[1]})
        cases.append(entry)
    meta = {"cases": json.dumps(cases), "lycoris_lora": importlib.metadata.version("lycoris-lora"),
            "torch": torch.__version__}
    save_file(out, args.output, metadata=meta)


if __name__ == "__main__":
    main()
