#!/usr/bin/env python3
"""Manual check (no fixture): a LoHa / LoKr file lorafleet trained on the tiny preset loads in
lycoris-lora's kohya loader (lycoris.kohya create_network_from_weights' module loop: get_module +
make_module per kohya name on the diffusers UNet and text encoder, built from the base
checkpoint as make_lora_fixture.py does). Checks that every module of the file becomes a LyCORIS
module, each holding exactly the file's tensors, and that the applied modules change the UNet's
output.

Usage: check_lycoris_file.py BASE_CHECKPOINT LORA_FILE   (tiny preset; prints OK)
"""
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
from safetensors.torch import load_file
import oracle_lib as ol
from make_lora_fixture import build_text_encoders
from diffusers import UNet2DConditionModel
from lycoris.kohya import create_network_from_weights

ckpt_path, lora_path = sys.argv[1], sys.argv[2]
spec = ol.PRESETS["tiny"]
ckpt = ol.RecordingDict(load_file(ckpt_path))
unet = ol.load_single_file(UNet2DConditionModel, "unet", ckpt, spec.original_config,
                           spec.unet_overrides, "model.diffusion_model.")
te = build_text_encoders(spec, ckpt)[0]
sd = load_file(lora_path)
names = {k.split(".")[0] for k in sd}
g = torch.Generator().manual_seed(0)
x = torch.randn(2, 4, 8, 8, generator=g); t = torch.tensor([17, 803])
ctx = torch.randn(2, 16, unet.config.cross_attention_dim, generator=g)
with torch.no_grad():
    base = unet(x, t, ctx).sample
# create_network_from_weights' module loop (its LycorisNetworkKohya wrapper asserts on a
# duplicate name in the tiny UNet's own target scan, unrelated to the file).
from lycoris.kohya import get_module, make_module
mods = []
for prefix, model in (("lora_unet", unet), ("lora_te", te)):
    for name, orig in model.named_modules():
        # transformers 5's CLIPTextModel has no text_model level; kohya's names (and LyCORIS with
        # transformers 4) have it.
        if prefix == "lora_te" and not hasattr(model, "text_model"):
            name = "text_model." + name
        lora_name = f"{prefix}_{name}".replace(".", "_")
        if lora_name in names:
            lyco_type, params = get_module(sd, lora_name)
            mods.append(make_module(lyco_type, params, lora_name, orig))
print("file modules", len(names), "lycoris modules", len(mods), "types", {type(m).__name__ for m in mods})
got = {m.lora_name for m in mods}
print("missing", sorted(names - got)[:8], len(names - got))
assert len(mods) == len(names), "modules missing in LyCORIS"
for m in mods:
    for k, v in m.custom_state_dict().items():
        want = sd[f"{m.lora_name}.{k}"]
        assert torch.equal(v.detach().float(), want.float()), (m.lora_name, k)
for m in mods:
    m.apply_to()
with torch.no_grad():
    out = unet(x, t, ctx).sample
print("max |unet with - without|", (out - base).abs().max().item())
assert (out - base).abs().max().item() > 0
print("OK")
