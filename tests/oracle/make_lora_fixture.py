"""diffusers' kohya-LoRA loader on a LoRA file trained by lorafleet: keys consumed, UNet output.

Loads lorafleet's tiny base checkpoint exactly as make_parity_fixture.py does (diffusers
`from_single_file` for UNet/VAE, transformers CLIPTextModel; SDXL's open_clip-layout second
encoder through diffusers' own convert_open_clip_checkpoint into CLIPTextModelWithProjection,
the model diffusers' SDXL pipeline uses), builds a StableDiffusion(XL)Pipeline from those
modules and calls `pipe.load_lora_weights(file)`: diffusers' own kohya -> PEFT conversion
(lora_conversion_utils, incl. the sgm block remap for SDXL) and PEFT injection. No kohya name
mapping of ours is used. The load must be complete, checked independently of diffusers' logging:
  * no warning from diffusers / peft / transformers during the load (they only *log* unexpected
    and missing adapter keys);
  * every converted tensor is found, bit-identical, in an injected LoRA layer's lora_A / lora_B,
    and every injected LoRA weight came from the file;
  * injected LoRA layers == kohya modules in the file (per component), and each layer's scale
    is the file's alpha / rank.
Then, fp32 CPU, on fixed inputs (torch seed below; same shapes as the parity fixture):
  unet.x [2,4,8,8]  unet.t [2] int64  unet.context [2,16,C]  (SDXL: unet.pooled, unet.time_ids)
  unet.out_base: the UNet without the LoRA;  unet.out_lora: with it (scale 1.0)
  te{i}.input_ids, te{i}.hidden_base, te{i}.hidden_lora: only for encoders the file has modules
      for (hidden as the family conditions on it: layer `hidden_layer_from_end`, final LN for SD1)
and asserts the LoRA moves the UNet output by more than 1e-3 (max abs), else the file proves
nothing. __metadata__: preset, lora_sha256, checkpoint_sha256, checkpoint_seed, module counts.
tests/core/test_oracle_lora.cpp loads the same file into lorafleet's LoRANetwork and compares.

Run: tests/oracle/regen.sh (trains the LoRA with tests/fixtures/oracle/lora_tiny.yaml first), or
  python make_lora_fixture.py --preset tiny --checkpoint tiny.ckpt.safetensors \
    --lora tests/fixtures/oracle/lora_tiny.safetensors \
    --output tests/fixtures/oracle/lora_tiny_expected.safetensors
"""
import argparse
import logging
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_lib as ol  # noqa: E402
from make_parity_fixture import CAPTIONS, sha256_file, tokenize  # noqa: E402

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

INPUT_SEED = 20240611
ADAPTER = "lorafleet"
MIN_EFFECT = 1e-3  # max |out_lora - out_base| below this: the LoRA is too weak to prove anything
# kohya prefixes -> the pipeline component diffusers loads them into.
KOHYA_COMPONENTS = {"lora_unet_": "unet", "lora_te_": "text_encoder", "lora_te1_": "text_encoder",
                    "lora_te2_": "text_encoder_2"}


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(f"{record.name}: {record.getMessage()}")


def kohya_modules(lora):
    """{component: {kohya lora_name: (rank, alpha)}} of the file; every key must belong to a
    down/up/alpha triple (anything else is an unmatched key by definition)."""
    out, odd = {}, []
    for key, t in lora.items():
        name, _, rest = key.partition(".")
        comp = next((c for p, c in KOHYA_COMPONENTS.items() if name.startswith(p)), None)
        if comp is None or rest not in ("lora_down.weight", "lora_up.weight", "alpha"):
            odd.append(key)
            continue
        out.setdefault(comp, {}).setdefault(name, {})[rest] = t
    for comp, mods in out.items():
        for name, parts in mods.items():
            if set(parts) != {"lora_down.weight", "lora_up.weight", "alpha"}:
                odd.append(f"{name}: has only {sorted(parts)}")
    if odd:
        raise RuntimeError(f"not kohya LoRA keys: {odd[:10]} ({len(odd)} in all)")
    return {c: {n: (int(p["lora_down.weight"].shape[0]), float(p["alpha"]),
                    p["lora_down.weight"].dim() == 4 and p["lora_down.weight"].shape[-1] > 1)
                for n, p in m.items()} for c, m in out.items()}


def network_shape(modules):
    """(network_dim, network_alpha, conv_dim, conv_alpha) of the file, read from its tensors (kohya
    options the C++ side builds its LoRANetwork with; per-module alphas are loaded anyway).
    kxk convs (LoCon) have their own rank; each kind must have one rank."""
    dims = {False: set(), True: set()}
    alphas = {False: set(), True: set()}
    for mods in modules.values():
        for rank, alpha, kxk in mods.values():
            dims[kxk].add(rank)
            alphas[kxk].add(alpha)
    if len(dims[False]) > 1 or len(dims[True]) > 1:
        raise RuntimeError(f"several ranks in one file: {dims}")
    pick = lambda s: next(iter(s)) if s else 0  # noqa: E731
    return pick(dims[False]), pick(alphas[False]), pick(dims[True]), pick(alphas[True])


def build_text_encoders(spec, ckpt):
    """The pipeline's text encoders: HF layout via oracle_lib (transformers CLIPTextModel); an
    open_clip-layout encoder via diffusers' convert_open_clip_checkpoint into the class its
    pipeline uses (SDXL: CLIPTextModelWithProjection; SD 2.x: CLIPTextModel)."""
    encoders = []
    for te in spec.text_encoders:
        if te.layout == "hf":
            encoders.append(ol.load_text_encoder(te, ckpt))
            continue
        from diffusers.loaders import single_file_utils as sfu
        from transformers import CLIPTextModel, CLIPTextModelWithProjection
        cfg = ol.hf_text_config(te)
        cfg.projection_dim = te.projection_dim
        # SDXL's second encoder is a CLIPTextModelWithProjection; SD 2.x's pipeline uses a plain
        # CLIPTextModel (its text_projection is never used).
        model = (CLIPTextModelWithProjection if spec.sdxl else CLIPTextModel)(cfg)
        converted = sfu.convert_open_clip_checkpoint(model, ckpt, prefix=te.prefix)
        if not hasattr(model, "text_model"):  # as create_diffusers_clip_model_from_ldm does
            converted = {k.removeprefix("text_model."): v for k, v in converted.items()}
        missing, unexpected = model.load_state_dict(converted, strict=False)
        missing = [k for k in missing if not k.endswith("position_ids")]
        if missing or unexpected:
            raise RuntimeError(f"open_clip -> CLIPTextModelWithProjection: missing {missing[:10]}, "
                               f"unexpected {unexpected[:10]}")
        encoders.append(model.eval().float())
    return encoders


def build_pipeline(spec, unet, vae, encoders):
    """A pipeline object around the reference modules, only to call its load_lora_weights.
    Tokenizers are not needed to load a LoRA (and need hub files), so they are None."""
    from diffusers import DDPMScheduler, StableDiffusionPipeline, StableDiffusionXLPipeline
    sched = DDPMScheduler()
    if spec.sdxl:
        return StableDiffusionXLPipeline(vae=vae, text_encoder=encoders[0],
                                         text_encoder_2=encoders[1], tokenizer=None,
                                         tokenizer_2=None, unet=unet, scheduler=sched)
    return StableDiffusionPipeline(vae=vae, text_encoder=encoders[0], tokenizer=None, unet=unet,
                                   scheduler=sched, safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False)


def check_consumed(pipe, lora_path, modules):
    """Everything diffusers converted from the file sits bit-identically in the injected layers,
    every injected layer got its weights from the file, layer counts and scales match."""
    from peft.tuners.tuners_utils import BaseTunerLayer
    converted, _ = type(pipe).lora_state_dict(
        lora_path, **({"unet_config": pipe.unet.config} if hasattr(pipe, "text_encoder_2") else {}))
    by_comp = {}
    for key, t in converted.items():
        comp, _, rest = key.partition(".")
        by_comp.setdefault(comp, {})[rest] = t
    # The PEFT spelling diffusers hands to PEFT, by diffusers' own functions (as
    # load_lora_adapter / _load_lora_into_text_encoder do).
    from diffusers.utils import (convert_state_dict_to_diffusers, convert_state_dict_to_peft,
                                 convert_unet_state_dict_to_peft)
    for comp in list(by_comp):
        if comp == "unet":
            by_comp[comp] = convert_unet_state_dict_to_peft(by_comp[comp])
            continue
        sd = convert_state_dict_to_peft(convert_state_dict_to_diffusers(by_comp[comp]))
        if not hasattr(getattr(pipe, comp), "text_model"):
            sd = {k.removeprefix("text_model."): v for k, v in sd.items()}
        by_comp[comp] = sd
    if set(by_comp) != set(modules):
        raise RuntimeError(f"diffusers converted components {sorted(by_comp)}, the file has "
                           f"{sorted(modules)}")
    report = {}
    for comp, sd in by_comp.items():
        model = getattr(pipe, comp)
        params = dict(model.named_parameters())
        layers = {n: m for n, m in model.named_modules()
                  if isinstance(m, BaseTunerLayer) and ADAPTER in getattr(m, "lora_A", {})}
        consumed = set()
        for key, t in sd.items():
            # diffusers' converted key: "<module>.lora_A.weight"; PEFT's parameter:
            # "<module>.lora_A.<adapter>.weight".
            mod, _, tail = key.rpartition(".lora_")
            pname = f"{mod}.lora_{tail.split('.')[0]}.{ADAPTER}.{tail.split('.', 1)[1]}"
            p = params.get(pname)
            if p is None:
                raise RuntimeError(f"{comp}: converted key {key} has no injected parameter "
                                   f"({pname})")
            if p.shape != t.shape or not torch.equal(p.detach(), t.to(p.dtype)):
                raise RuntimeError(f"{comp}: {pname} does not hold the file's tensor {key}")
            consumed.add(pname)
        injected = {n for n in params if f".{ADAPTER}." in n and ".lora_" in n}
        if injected != consumed:
            raise RuntimeError(f"{comp}: injected LoRA weights not from the file: "
                               f"{sorted(injected - consumed)[:10]}")
        want = modules[comp]
        if len(layers) != len(want):
            raise RuntimeError(f"{comp}: {len(layers)} LoRA layers injected, the file has "
                               f"{len(want)} modules")
        got_scales = sorted(float(m.scaling[ADAPTER]) for m in layers.values())
        want_scales = sorted(alpha / rank for rank, alpha, _ in want.values())
        if any(abs(a - b) > 1e-7 for a, b in zip(got_scales, want_scales)):
            raise RuntimeError(f"{comp}: PEFT scales {sorted(set(got_scales))} != the file's "
                               f"alpha / rank {sorted(set(want_scales))}")
        report[comp] = (len(layers), len(sd))
    return report


def text_hidden(te, model, ids):
    """The hidden state the family conditions the UNet on (see oracle_lib.run_text_encoder)."""
    out = model(input_ids=ids, output_hidden_states=True)
    hidden = out.hidden_states[-te.hidden_layer_from_end]
    if te.apply_final_layer_norm:
        # transformers 5 flattens CLIPTextModel (no .text_model); older versions nest it.
        hidden = getattr(model, "text_model", model).final_layer_norm(hidden)
    return hidden


@torch.no_grad()
def run_all(spec, pipe, inputs, te_ids, suffix, out):
    kwargs = {}
    if spec.sdxl:
        kwargs["added_cond_kwargs"] = {"text_embeds": inputs["unet.pooled"],
                                       "time_ids": inputs["unet.time_ids"]}
    out["unet.out_" + suffix] = pipe.unet(inputs["unet.x"], inputs["unet.t"],
                                          inputs["unet.context"], **kwargs).sample
    encoders = [pipe.text_encoder] + ([pipe.text_encoder_2] if spec.sdxl else [])
    for i, ids in te_ids.items():
        out[f"te{i}.hidden_{suffix}"] = text_hidden(spec.text_encoders[i], encoders[i], ids)


def load_lora_checked(spec, pipe, lora_path, modules):
    """pipe.load_lora_weights(lora_path), failing on any complaint; returns check_consumed's
    report (per component: injected layers, tensors)."""
    te_components = ["text_encoder", "text_encoder_2"]
    # diffusers' kohya-LoRA loader, with everything it logs captured: it reports unexpected and
    # missing adapter keys only as warnings.
    records = _Records()
    loggers = [logging.getLogger(n) for n in ("diffusers", "peft", "transformers")]
    for lg in loggers:
        lg.addHandler(records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipe.load_lora_weights(lora_path, adapter_name=ADAPTER)
    for lg in loggers:
        lg.removeHandler(records)
    # The one expected notice: a component the file has no modules for (UNet-only LoRA).
    absent = [f"No LoRA keys associated to {type(getattr(pipe, c)).__name__} found with the "
              f"prefix='{c}'" for c in te_components[:len(spec.text_encoders)] if c not in modules]
    complaints = [r for r in records.records + [str(w.message) for w in caught
                                                 if not issubclass(w.category, DeprecationWarning)]
                  if not any(a in r for a in absent)]
    if complaints:
        raise RuntimeError("diffusers' LoRA load complained:\n  " + "\n  ".join(complaints))
    return check_consumed(pipe, lora_path, modules)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", required=True, choices=sorted(ol.PRESETS))
    ap.add_argument("--checkpoint", required=True, help="the base the LoRA was trained on")
    ap.add_argument("--lora", required=True, help="kohya LoRA file written by lorafleet")
    ap.add_argument("--output", help="the fixture to write (required unless --check-only)")
    ap.add_argument("--check-only", action="store_true",
                    help="only load the LoRA and check every key was consumed (no fixture)")
    args = ap.parse_args()
    if not args.check_only and not args.output:
        ap.error("--output is required unless --check-only")
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    spec = ol.PRESETS[args.preset]
    from diffusers import AutoencoderKL, UNet2DConditionModel

    with safe_open(args.checkpoint, "pt") as f:
        ckpt_meta = f.metadata() or {}
    with safe_open(args.lora, "pt") as f:
        lora_meta = f.metadata() or {}
    modules = kohya_modules(load_file(args.lora))
    dim, alpha, conv_dim, conv_alpha = network_shape(modules)
    ckpt = ol.RecordingDict(load_file(args.checkpoint))
    unet = ol.load_single_file(UNet2DConditionModel, "unet", ckpt, spec.original_config,
                               spec.unet_overrides, "model.diffusion_model.")
    # The VAE only completes the pipeline; an encoder-only checkpoint gets a config-built one.
    if any(k.startswith("first_stage_model.decoder.") for k in ckpt):
        vae = ol.load_single_file(AutoencoderKL, "vae", ckpt, spec.original_config,
                                  spec.vae_overrides, "first_stage_model.")
    else:
        original = ol.load_yaml(os.path.join(ol.CONFIGS, spec.original_config))
        vae = AutoencoderKL.from_config(
            ol.derived_diffusers_config("vae", original, ckpt, spec.vae_overrides))
    encoders = build_text_encoders(spec, ckpt)
    pipe = build_pipeline(spec, unet, vae, encoders)
    if args.check_only:
        report = load_lora_checked(spec, pipe, args.lora, modules)
        summary = ", ".join(f"{c}: {n} modules / {k} tensors" for c, (n, k) in sorted(report.items()))
        print(f"{args.lora}: diffusers' load_lora_weights consumed every key ({summary})")
        return

    g = torch.Generator().manual_seed(INPUT_SEED)
    inputs = {"unet.x": torch.randn(2, 4, 8, 8, generator=g),
              "unet.t": torch.tensor([17, 803], dtype=torch.int64),
              "unet.context": torch.randn(2, 16, unet.config.cross_attention_dim, generator=g)}
    if spec.sdxl:
        inputs["unet.pooled"] = torch.randn(2, spec.text_encoders[-1].projection_dim, generator=g)
        inputs["unet.time_ids"] = torch.tensor([[1024., 1024., 0., 0., 1024., 1024.],
                                                [768., 1344., 32., 64., 832., 1216.]])
    te_components = ["text_encoder", "text_encoder_2"]
    te_ids = {i: tokenize(CAPTIONS, te.pad_token) for i, te in enumerate(spec.text_encoders)
              if te_components[i] in modules}
    for i, ids in te_ids.items():
        inputs[f"te{i}.input_ids"] = ids

    out = dict(inputs)
    run_all(spec, pipe, inputs, te_ids, "base", out)

    report = load_lora_checked(spec, pipe, args.lora, modules)

    run_all(spec, pipe, inputs, te_ids, "lora", out)
    effect = (out["unet.out_lora"] - out["unet.out_base"]).abs().max().item()
    if effect <= MIN_EFFECT:
        raise RuntimeError(f"the LoRA changes the UNet output by only {effect:.3g} (<= "
                           f"{MIN_EFFECT}): train it harder (learning_rate / max_train_steps)")
    # Adapters off again -> the base output: the LoRA is the only difference between the two.
    pipe.unet.disable_adapters()
    again = {}
    run_all(spec, pipe, inputs, {}, "off", again)
    # Not bitwise: peft's disabled path may run other kernels (seen on the SDXL UNet at ~1e-7).
    off_diff = (again["unet.out_off"] - out["unet.out_base"]).abs().max().item()
    if off_diff > 1e-5:
        raise RuntimeError(f"UNet with adapters disabled differs from the base UNet by "
                           f"{off_diff:.3g}")

    meta = {"preset": spec.name, "input_seed": str(INPUT_SEED),
            "lora_sha256": sha256_file(args.lora),
            "lora_network_dim": str(dim), "lora_network_alpha": repr(alpha),
            "lora_conv_dim": str(conv_dim), "lora_conv_alpha": repr(conv_alpha),
            "lora_ss_network_dim": lora_meta.get("ss_network_dim", ""),
            "lora_ss_network_alpha": lora_meta.get("ss_network_alpha", ""),
            "checkpoint_sha256": sha256_file(args.checkpoint),
            "checkpoint_seed": ckpt_meta.get("lorafleet.seed", ""),
            "components": ",".join(sorted(report)),
            "generator": "tests/oracle/make_lora_fixture.py"}
    for comp, (layers, keys) in report.items():
        meta[f"{comp}_modules"] = str(layers)
        meta[f"{comp}_tensors"] = str(keys)
    out = {k: v.detach().contiguous() for k, v in out.items()}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    save_file(out, args.output, metadata=meta)
    summary = ", ".join(f"{c}: {n} modules / {k} tensors" for c, (n, k) in sorted(report.items()))
    print(f"wrote {args.output}: diffusers consumed {summary}; max|lora - base| {effect:.4g}")


if __name__ == "__main__":
    main()
