"""Full-size key sets and parameter counts of lorafleet's SD 1.5 / SDXL presets vs the references.

Input: a key listing written by `lorafleet-make-checkpoint --preset sd15|sdxl --keys-only`
(lines `key<TAB>d0,d1,...`). No weights are materialised: each key becomes
torch.zeros(1).expand(shape), wrapped in a dict that records which keys the converter read.

Per component, the reference's own conversion turns the listing into the reference's names and
the result is compared (keys and shapes) with the reference model's state_dict, the model built
on the meta device from the reference config:
  UNet  diffusers convert_ldm_unet_checkpoint / UNet2DConditionModel from
        create_unet_diffusers_config_from_ldm(configs/v1-inference.yaml | sd_xl_base.yaml)
  VAE   diffusers convert_ldm_vae_checkpoint / AutoencoderKL from
        create_vae_diffusers_config_from_ldm(same yaml)
  text  HF layout: transformers.CLIPTextModel(CLIPTextConfig of CLIP ViT-L/14), keys under
        "...text_model." stripped; open_clip layout: open_clip.CLIP with ViT-bigG-14's text cfg
        (open_clip's own model config), visual tower deleted, keys under the prefix stripped.
Reported: missing keys, unexpected keys (converter output the model lacks, listing keys the
converter dropped or never read), shape mismatches. Exit status 1 on any. With --write, records
tests/fixtures/oracle/<preset>_full_size.json: the reference parameter counts per component and
the accepted key listing's count and SHA-256 (canonical text: sorted `key<TAB>d0,d1` lines, each
ending in '\\n'; the listing itself is written next to it when < 100 KB).

Run: tests/oracle/regen.sh, or
     python check_full_size.py --preset sd15 --keys sd15.keys [--write]
"""
import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_lib as ol  # noqa: E402

import torch  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(ol.HERE), "fixtures", "oracle")

FULL = {
    "sd15": {
        "yaml": "v1-inference.yaml",
        "text": [("hf", "cond_stage_model.transformer.text_model.", "vit_l_14")],
    },
    "sdxl": {
        "yaml": "sd_xl_base.yaml",
        "text": [("hf", "conditioner.embedders.0.transformer.text_model.", "vit_l_14"),
                 ("open_clip", "conditioner.embedders.1.model.", "ViT-bigG-14")],
    },
}


def read_listing(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            key, dims = line.split("\t")
            shape = [int(d) for d in dims.split(",")] if dims else []
            out[key] = shape
    return out


def canonical(listing):
    return "".join(f"{k}\t{','.join(map(str, listing[k]))}\n" for k in sorted(listing))


def compare(name, converted, reference):
    """converted/reference: {key: shape}. Returns a list of problem strings."""
    problems = []
    missing = sorted(set(reference) - set(converted))
    unexpected = sorted(set(converted) - set(reference))
    if missing:
        problems.append(f"{name}: {len(missing)} missing, e.g. {missing[:5]}")
    if unexpected:
        problems.append(f"{name}: {len(unexpected)} unexpected, e.g. {unexpected[:5]}")
    for k in sorted(set(reference) & set(converted)):
        if list(reference[k]) != list(converted[k]):
            problems.append(f"{name}: {k} shape {list(converted[k])} != {list(reference[k])}")
    return problems


def dropped_by_conversion(ckpt, prefix, converted):
    """Listing keys under `prefix` whose tensor reaches no converted value. Every listing tensor
    has its own storage (a fresh torch.zeros(1)), and the converters only rename, slice or
    reshape views, so a key whose storage no converted tensor shares was dropped. (The converters
    copy every prefixed key into an internal dict first, so "read" alone proves nothing.)"""
    used = {v.untyped_storage().data_ptr() for v in converted.values()}
    return sorted(k for k in list(ckpt.keys()) if k.startswith(prefix)
                  and dict.__getitem__(ckpt, k).untyped_storage().data_ptr() not in used)


def shapes(state_dict):
    return {k: list(v.shape) for k, v in state_dict.items()}


def meta_model(build):
    from accelerate import init_empty_weights
    with init_empty_weights():
        return build()


def text_reference(layout, arch):
    if layout == "hf":
        from transformers import CLIPTextConfig, CLIPTextModel
        # CLIP ViT-L/14 text tower (openai/clip-vit-large-patch14 text_config).
        cfg = CLIPTextConfig(vocab_size=49408, hidden_size=768, intermediate_size=3072,
                             num_hidden_layers=12, num_attention_heads=12,
                             max_position_embeddings=77, hidden_act="quick_gelu",
                             projection_dim=768)
        return meta_model(lambda: CLIPTextModel(cfg)), {"embeddings.position_ids"}
    import open_clip
    model_cfg = open_clip.get_model_config(arch)  # open_clip's own ViT-bigG-14 json
    with torch.device("meta"):
        model = open_clip.CLIP(**model_cfg)
    del model.visual
    return model, set()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", required=True, choices=sorted(FULL))
    ap.add_argument("--keys", required=True, help="lorafleet key listing (key<TAB>shape)")
    ap.add_argument("--write", action="store_true", help="record the fixture json")
    args = ap.parse_args()
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from diffusers.loaders import single_file_utils as sfu

    spec = FULL[args.preset]
    listing = read_listing(args.keys)
    ckpt = ol.RecordingDict({k: torch.zeros(1).expand(s) if s else torch.zeros(())
                             for k, s in listing.items()})
    original = ol.load_yaml(os.path.join(ol.CONFIGS, spec["yaml"]))
    problems, counts = [], {}

    unet_cfg = sfu.create_unet_diffusers_config_from_ldm(original, ckpt)
    unet = meta_model(lambda: UNet2DConditionModel.from_config(unet_cfg))
    conv = sfu.convert_ldm_unet_checkpoint(ckpt, unet_cfg)
    problems += compare("unet", shapes(conv), shapes(unet.state_dict()))
    dropped = dropped_by_conversion(ckpt, "model.diffusion_model.", conv)
    if dropped:
        problems.append(f"unet: {len(dropped)} listing keys the conversion dropped "
                        f"(unexpected), e.g. {dropped[:5]}")
    counts["unet"] = sum(p.numel() for p in unet.parameters())

    has_decoder = any(k.startswith("first_stage_model.decoder.") for k in listing)
    vae_cfg = sfu.create_vae_diffusers_config_from_ldm(original, ckpt)
    vae = meta_model(lambda: AutoencoderKL.from_config(vae_cfg))
    conv = sfu.convert_ldm_vae_checkpoint(ckpt, vae_cfg)
    ref = shapes(vae.state_dict())
    if not has_decoder:
        # Listings from lorafleet before it writes the decoder: compare the encoder half only
        # and say so (the decoder is then reported as not checked, not as passing).
        print("NOTE: the listing has no VAE decoder; only the encoder half is compared")
        ref = {k: v for k, v in ref.items() if not k.startswith(("decoder.", "post_quant_conv."))}
    problems += compare("vae", shapes(conv), ref)
    dropped = dropped_by_conversion(ckpt, "first_stage_model.", conv)
    if dropped:
        problems.append(f"vae: {len(dropped)} listing keys the conversion dropped "
                        f"(unexpected), e.g. {dropped[:5]}")
    counts["vae"] = sum(p.numel() for p in vae.parameters())
    counts["vae_encoder"] = sum(p.numel() for n, p in vae.named_parameters()
                                if n.startswith(("encoder.", "quant_conv.")))

    for i, (layout, prefix, arch) in enumerate(spec["text"]):
        model, ignorable = text_reference(layout, arch)
        sub = {k[len(prefix):]: list(ckpt[k].shape) for k in list(ckpt.keys())
               if k.startswith(prefix)}
        sub = {k: v for k, v in sub.items() if k not in ignorable}
        ref = {k: v for k, v in shapes(model.state_dict()).items() if k not in ignorable}
        problems += compare(f"te{i} ({layout} {arch})", sub, ref)
        counts[f"te{i}"] = sum(p.numel() for p in model.parameters())

    unread = ckpt.unread()
    if unread:
        problems.append(f"{len(unread)} listing keys no reference conversion read, "
                        f"e.g. {unread[:5]}")

    listing_text = canonical(listing)
    print(f"{args.preset}: {len(listing)} keys; reference parameter counts {counts}")
    for p in problems:
        print("PROBLEM:", p)
    if args.write and not problems:
        os.makedirs(FIXTURES, exist_ok=True)
        doc = {"preset": args.preset, "generator": "tests/oracle/check_full_size.py",
               "reference_parameter_counts": counts, "vae_decoder_checked": has_decoder,
               "key_count": len(listing),
               "keys_sha256": hashlib.sha256(listing_text.encode()).hexdigest()}
        if len(listing_text) < 100_000:  # sd15 ~72 KB; SDXL: count + SHA-256 only
            with open(os.path.join(FIXTURES, f"{args.preset}_keys.txt"), "w") as f:
                f.write(listing_text)
            doc["keys_file"] = f"{args.preset}_keys.txt"
        with open(os.path.join(FIXTURES, f"{args.preset}_full_size.json"), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote {args.preset}_full_size.json")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
