"""Reference outputs of diffusers / transformers / open_clip on a lorafleet checkpoint.

Loads the single-file checkpoint written by `lorafleet-make-checkpoint` through the references'
own loaders (see oracle_lib.py), runs each network in fp32 on fixed inputs (torch seed below)
and writes inputs + outputs to one safetensors file that tests/core/test_oracle_parity.cpp
compares lorafleet against (atol 1e-4):

  unet.x [2,4,8,8]  unet.t [2] int64  unet.context [2,16,C]  (SDXL: unet.pooled [2,P],
  unet.time_ids [2,6], unet.y [2,adm] = the vector diffusers feeds add_embedding)  unet.out
  vae.image [2,3,32,32] in [-1,1] (32 px, latents 4x4, still through every VAE level; keeps the
      committed files small)  vae.mean  vae.logvar  (posterior, not a sample)
  vae.latents [2,4,4,4]: training-scale latents (z * scaling_factor); diffusers decodes
      vae.latents / scaling_factor, lorafleet's decode(latents) divides by scale_factor itself.
  vae.decoded [2,3,32,32]  (only when the checkpoint carries the decoder)
  te{i}.input_ids [2,77] int64 (open_clip tokenizer, the encoder's pad)  te{i}.hidden  te{i}.pooled
__metadata__: preset, seed, checkpoint_sha256, checkpoint_seed, components.

Run: tests/oracle/regen.sh (or: python make_parity_fixture.py --preset tiny
     --checkpoint tiny.safetensors --output tests/fixtures/oracle/tiny.safetensors).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_lib as ol  # noqa: E402

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

INPUT_SEED = 20240607
CAPTIONS = ["a photo of a cat sitting on a red mat",
            "masterpiece, best quality, 1girl, solo, looking at viewer, Ünïcödé, 🎉"]




def tokenize(captions, pad):
    import open_clip
    ids = open_clip.tokenize(captions, context_length=77)  # pads with 0
    if pad != 0:
        for row in ids:
            eot = int((row == 49407).nonzero()[0])
            row[eot + 1:] = pad
    return ids.long()


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", required=True, choices=sorted(ol.PRESETS))
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    spec = ol.PRESETS[args.preset]
    from diffusers import AutoencoderKL, UNet2DConditionModel

    from safetensors import safe_open
    with safe_open(args.checkpoint, "pt") as f:
        file_meta = f.metadata() or {}
    ckpt = ol.RecordingDict(load_file(args.checkpoint))
    has_decoder = any(k.startswith("first_stage_model.decoder.") for k in ckpt)

    unet = ol.load_single_file(UNet2DConditionModel, "unet", ckpt, spec.original_config,
                               spec.unet_overrides, "model.diffusion_model.")
    vae_cfg_prefix = "first_stage_model."
    if has_decoder:
        vae = ol.load_single_file(AutoencoderKL, "vae", ckpt, spec.original_config,
                                  spec.vae_overrides, vae_cfg_prefix)
    else:
        vae = load_encoder_only_vae(spec, ckpt)
    encoders = [ol.load_text_encoder(te, ckpt) for te in spec.text_encoders]
    unread = ckpt.unread()
    if unread:
        raise RuntimeError(f"checkpoint keys no reference loader read: {unread[:10]} "
                           f"({len(unread)} in all)")

    g = torch.Generator().manual_seed(INPUT_SEED)
    out = {}
    context_dim = unet.config.cross_attention_dim
    out["unet.x"] = torch.randn(2, 4, 8, 8, generator=g)
    out["unet.t"] = torch.tensor([17, 803], dtype=torch.int64)
    out["unet.context"] = torch.randn(2, 16, context_dim, generator=g)
    kwargs = {}
    if spec.sdxl:
        pooled_dim = spec.text_encoders[-1].projection_dim
        out["unet.pooled"] = torch.randn(2, pooled_dim, generator=g)
        out["unet.time_ids"] = torch.tensor([[1024., 1024., 0., 0., 1024., 1024.],
                                             [768., 1344., 32., 64., 832., 1216.]])
        kwargs["added_cond_kwargs"] = {"text_embeds": out["unet.pooled"],
                                       "time_ids": out["unet.time_ids"]}
        captured = {}
        hook = unet.add_embedding.register_forward_pre_hook(
            lambda m, a: captured.__setitem__("y", a[0].clone()))
    out["unet.out"] = unet(out["unet.x"], out["unet.t"], out["unet.context"], **kwargs).sample
    if spec.sdxl:
        hook.remove()
        out["unet.y"] = captured["y"]

    out["vae.image"] = torch.rand(2, 3, 32, 32, generator=g) * 2 - 1
    posterior = vae.encode(out["vae.image"]).latent_dist
    out["vae.mean"], out["vae.logvar"] = posterior.mean, posterior.logvar
    scale = float(vae.config.scaling_factor)
    out["vae.latents"] = torch.randn(2, 4, 4, 4, generator=g) * scale
    if has_decoder:
        out["vae.decoded"] = vae.decode(out["vae.latents"] / scale).sample

    for i, (te, model) in enumerate(zip(spec.text_encoders, encoders)):
        ids = tokenize(CAPTIONS, te.pad_token)
        hidden, pooled = ol.run_text_encoder(te, model, ids)
        out[f"te{i}.input_ids"], out[f"te{i}.hidden"], out[f"te{i}.pooled"] = ids, hidden, pooled

    components = ["unet", "vae.encoder"] + (["vae.decoder"] if has_decoder else []) + \
        [f"te{i}" for i in range(len(encoders))]
    meta = {"preset": spec.name, "input_seed": str(INPUT_SEED),
            "checkpoint_sha256": ol.sha256_file(args.checkpoint),
            "checkpoint_seed": file_meta.get("lorafleet.seed", ""),
            "vae_scaling_factor": repr(scale), "components": ",".join(components),
            "generator": "tests/oracle/make_parity_fixture.py"}
    out = {k: v.detach().contiguous() for k, v in out.items()}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    save_file(out, args.output, metadata=meta)
    print(f"wrote {args.output}: {len(out)} tensors, components {meta['components']}")


def load_encoder_only_vae(spec, ckpt):
    """Checkpoints without the VAE decoder (lorafleet's make_random_checkpoint before it writes
    one): diffusers' VAE config derivation and convert_ldm_vae_checkpoint, encoder keys only
    checked (the decoder stays uninitialised and is not run)."""
    from diffusers import AutoencoderKL
    from diffusers.loaders import single_file_utils as sfu
    original = ol.load_yaml(os.path.join(ol.CONFIGS, spec.original_config))
    cfg = ol.derived_diffusers_config("vae", original, ckpt, spec.vae_overrides)
    vae = AutoencoderKL.from_config(cfg)
    converted = sfu.convert_ldm_vae_checkpoint(ckpt, cfg)
    missing, unexpected = vae.load_state_dict(converted, strict=False)
    missing = [k for k in missing if not k.startswith(("decoder.", "post_quant_conv."))]
    if missing or unexpected:
        raise RuntimeError(f"VAE encoder: missing {missing[:10]}, unexpected {unexpected[:10]}")
    return vae.eval().float()


if __name__ == "__main__":
    main()
