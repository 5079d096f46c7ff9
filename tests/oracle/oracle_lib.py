"""Shared pieces of lorafleet's Python oracle: the preset table and the reference loaders.

Every reference model is built by its own library and fed lorafleet's single-file checkpoint
through that library's own conversion:
  * UNet / VAE: diffusers `from_single_file` (its create_*_diffusers_config_from_ldm derivation
    from the ldm/sgm yaml under configs/, and its convert_ldm_* key conversion);
  * HF-layout CLIP text encoders: transformers.CLIPTextModel, checkpoint tensors under the
    preset's prefix with the part through "text_model." stripped (HF's own parameter names:
    transformers 5's CLIPTextModel has embeddings/encoder/final_layer_norm at top level);
  * open_clip-layout text encoders: open_clip.CLIP built from a text cfg (visual tower
    deleted, as ldm's FrozenOpenCLIPEmbedder does), tensors under the prefix with the prefix
    stripped (open_clip's own parameter names).
No ldm<->diffusers name mapping of ours appears here.

Not a test by itself; imported by make_parity_fixture.py and check_full_size.py.
"""
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "configs")


@dataclass
class TextEncoderSpec:
    layout: str  # "hf" | "open_clip"
    # Checkpoint prefix of the encoder's own state_dict. HF: through "text_model." (transformers
    # 5's CLIPTextModel holds embeddings/encoder/final_layer_norm directly).
    prefix: str
    hidden: int
    layers: int
    heads: int
    mlp: int
    act: str  # "quick_gelu" | "gelu"
    hidden_layer_from_end: int  # 1 = last layer, 2 = penultimate
    apply_final_layer_norm: bool
    pad_token: int
    projection_dim: Optional[int] = None  # open_clip text_projection [hidden, projection_dim]


@dataclass
class PresetSpec:
    name: str
    original_config: str  # yaml under configs/
    # Fields of the diffusers configs derived from the yaml that the yaml cannot express
    # (ldm/sgm hard-code GroupNorm(32); diffusers infers SDXL's text_time embedding only for
    # context_dim 2048/1280). Everything else comes from diffusers' own derivation.
    unet_overrides: Dict[str, object] = field(default_factory=dict)
    vae_overrides: Dict[str, object] = field(default_factory=dict)
    text_encoders: List[TextEncoderSpec] = field(default_factory=list)
    sdxl: bool = False


PRESETS = {
    "tiny": PresetSpec(
        name="tiny",
        original_config="tiny.yaml",
        unet_overrides={"norm_num_groups": 8},
        vae_overrides={"norm_num_groups": 8},
        text_encoders=[
            TextEncoderSpec("hf", "cond_stage_model.transformer.text_model.", 64, 2, 2, 128, "quick_gelu",
                            1, True, 49407),
        ],
    ),
    "tiny-sd2": PresetSpec(
        name="tiny-sd2",
        original_config="tiny-sd2.yaml",
        unet_overrides={"norm_num_groups": 8},
        vae_overrides={"norm_num_groups": 8},
        text_encoders=[
            TextEncoderSpec("open_clip", "cond_stage_model.model.", 64, 3, 4, 256, "gelu",
                            2, True, 0, projection_dim=64),
        ],
    ),
    "tiny-sdxl": PresetSpec(
        name="tiny-sdxl",
        original_config="tiny-sdxl.yaml",
        unet_overrides={
            "norm_num_groups": 8,
            "class_embed_type": None,
            "addition_embed_type": "text_time",
            "addition_time_embed_dim": 256,
            "projection_class_embeddings_input_dim": 1568,
        },
        vae_overrides={"norm_num_groups": 8},
        text_encoders=[
            TextEncoderSpec("hf", "conditioner.embedders.0.transformer.text_model.", 48, 3, 2, 96,
                            "quick_gelu", 2, False, 49407),
            TextEncoderSpec("open_clip", "conditioner.embedders.1.model.", 64, 3, 4, 256, "gelu",
                            2, False, 0, projection_dim=32),
        ],
        sdxl=True,
    ),
}


class RecordingDict(dict):
    """A checkpoint dict that records which keys the converter read, so that keys it never
    touched are reported as unused instead of silently dropped."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key in self:
            self.read.add(key)
        return super().get(key, default)

    def pop(self, key, *default):
        if key in self:
            self.read.add(key)
        return super().pop(key, *default)

    def unread(self, prefix=""):
        return sorted(k for k in self.keys() if k.startswith(prefix) and k not in self.read)


def load_yaml(path):
    import yaml
    with open(path) as f:
        return yaml.safe_load(f)


def derived_diffusers_config(kind, original_config, checkpoint, overrides):
    """diffusers' own derivation of the UNet ("unet") or VAE ("vae") config from the ldm yaml,
    plus `overrides`. Returns the config dict."""
    from diffusers.loaders import single_file_utils as sfu
    if kind == "unet":
        cfg = sfu.create_unet_diffusers_config_from_ldm(original_config, checkpoint)
    else:
        cfg = sfu.create_vae_diffusers_config_from_ldm(original_config, checkpoint)
    cfg = dict(cfg)
    cfg.update(overrides)
    return cfg


def load_single_file(cls, kind, checkpoint, spec_or_yaml, overrides, prefix):
    """cls.from_single_file on the checkpoint dict (a RecordingDict) with the config diffusers
    derives from the yaml (+ overrides, written as a local config dir). Asserts the model has
    no parameter left unloaded and that the converter read every key under `prefix`."""
    original = load_yaml(os.path.join(CONFIGS, spec_or_yaml))
    cfg = derived_diffusers_config(kind, original, checkpoint, overrides)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        # low_cpu_mem_usage: parameters the converted state dict lacks stay on the meta
        # device (instead of keeping a random init), which the check below catches.
        model = cls.from_single_file(checkpoint, config=d, local_files_only=True,
                                     low_cpu_mem_usage=True)
    missing = [n for n, p in list(model.named_parameters()) + list(model.named_buffers())
               if p.device.type == "meta"]
    if missing:
        raise RuntimeError(f"{cls.__name__}: parameters not loaded from the checkpoint: "
                           f"{missing[:10]} ({len(missing)} in all)")
    unread = checkpoint.unread(prefix)
    if unread:
        raise RuntimeError(f"{cls.__name__}: checkpoint keys the converter never read: "
                           f"{unread[:10]} ({len(unread)} in all)")
    return model.eval().float()


def hf_text_config(te):
    from transformers import CLIPTextConfig
    return CLIPTextConfig(vocab_size=49408, hidden_size=te.hidden, intermediate_size=te.mlp,
                          num_hidden_layers=te.layers, num_attention_heads=te.heads,
                          max_position_embeddings=77, hidden_act=te.act, layer_norm_eps=1e-5,
                          bos_token_id=49406, eos_token_id=49407, pad_token_id=te.pad_token,
                          projection_dim=te.hidden)


def open_clip_text_cfg(te):
    from open_clip.model import CLIPTextCfg
    return CLIPTextCfg(context_length=77, vocab_size=49408, width=te.hidden, heads=te.heads,
                       layers=te.layers, mlp_ratio=te.mlp / te.hidden)


def build_open_clip_text(te, device=None):
    """open_clip.CLIP with `te`'s text tower and the visual tower deleted (ldm's
    FrozenOpenCLIPEmbedder does `del model.visual`). quick_gelu False = nn.GELU (erf)."""
    import open_clip
    from open_clip.model import CLIPVisionCfg
    assert te.act == "gelu"
    vision = CLIPVisionCfg(layers=1, width=64, head_width=64, patch_size=16, image_size=32)
    with torch.device(device or "cpu"):
        model = open_clip.CLIP(embed_dim=te.projection_dim, vision_cfg=vision,
                               text_cfg=open_clip_text_cfg(te), quick_gelu=False)
    del model.visual
    return model


def load_text_encoder(te, checkpoint):
    """Reference text encoder for `te` with the checkpoint's tensors loaded strictly."""
    sub = {k[len(te.prefix):]: checkpoint[k] for k in list(checkpoint.keys())
           if k.startswith(te.prefix)}
    if te.layout == "hf":
        from transformers import CLIPTextModel
        model = CLIPTextModel(hf_text_config(te))
    else:
        model = build_open_clip_text(te)
    own = model.state_dict()
    # position_ids is a buffer of HF's CLIPTextEmbeddings (persistent or not depending on the
    # transformers version); checkpoints may or may not carry it. open_clip's attn_mask is a
    # non-persistent buffer.
    ignorable = {"embeddings.position_ids"}
    missing = sorted(set(own) - set(sub) - ignorable)
    unexpected = sorted(set(sub) - set(own) - ignorable)
    if missing or unexpected:
        raise RuntimeError(f"{te.layout} text encoder under {te.prefix}: missing {missing[:10]}, "
                           f"unexpected {unexpected[:10]}")
    for k, v in sub.items():
        if k in own and tuple(own[k].shape) != tuple(v.shape):
            raise RuntimeError(f"{te.prefix}{k}: shape {tuple(v.shape)} != {tuple(own[k].shape)}")
    model.load_state_dict({k: v for k, v in sub.items() if k in own}, strict=False)
    return model.eval().float()


@torch.no_grad()
def run_text_encoder(te, model, ids):
    """(hidden [B, 77, W], pooled) of the reference encoder. hidden: output of layer
    num_layers + 1 - hidden_layer_from_end, then the final LayerNorm when the family applies it.
    pooled: HF pooler_output (final LN at the first eot) / open_clip encode_text (ln_final at the
    argmax token, @ text_projection)."""
    if te.layout == "hf":
        out = model(input_ids=ids, output_hidden_states=True)
        hidden = out.hidden_states[-te.hidden_layer_from_end]
        if te.apply_final_layer_norm:
            hidden = model.final_layer_norm(hidden)
        return hidden, out.pooler_output
    captured = {}
    block = model.transformer.resblocks[te.layers - te.hidden_layer_from_end]
    handle = block.register_forward_hook(lambda m, i, o: captured.__setitem__("h", o))
    pooled = model.encode_text(ids)
    handle.remove()
    hidden = captured["h"]
    assert hidden.shape[:2] == ids.shape, hidden.shape  # batch-first
    if te.apply_final_layer_norm:
        hidden = model.ln_final(hidden)
    return hidden, pooled

def sha256_file(path):
    """SHA-256 hex of a file (the checkpoint a fixture was made from)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
