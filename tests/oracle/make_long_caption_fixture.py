"""Long-caption fixture: kohya's --max_token_length 150 / 225 text conditioning on a tiny preset.

The text encoders are the references kohya itself runs: transformers CLIPTextModel (SD 1.x, SDXL's
CLIP-L; HF layout loaded by oracle_lib) and, for an open_clip-layout encoder, diffusers'
convert_open_clip_checkpoint into CLIPTextModel (SD 2.x) / CLIPTextModelWithProjection (SDXL's
bigG), as make_lora_fixture.build_text_encoders does. Around them this script restates kohya
sd-scripts' chunking step by step (kohya is not on PyPI):
  * TokenizeStrategy._get_input_ids (library/strategy_base.py): the caption tokenised to
    max_token_length + 2 with padding="max_length", truncation=True, split into 75-token windows
    <BOS> ids[i:i+75] ids[-1]; with pad != eos, a window whose last slot holds a token ends with
    <EOS> and a window starting with <PAD> starts <BOS> <EOS>;
  * SdTextEncodingStrategy.encode_tokens (library/strategy_sd.py): every window through the
    encoder (clip_skip: hidden_states[-clip_skip] + final_layer_norm), reshaped to [b, n*77, d],
    then <BOS> + each window's [1:76] + the last state;
  * SdxlTextEncodingStrategy._get_hidden_states_sdxl (library/strategy_sdxl.py): both encoders'
    penultimate hidden states joined the same way, pool2 from _pool_workaround (last_hidden_state
    at the first <EOS>, @ text_projection) and pool2[::n_size], the first window's.
Tokens: open_clip's SimpleTokenizer (the BPE kohya's CLIPTokenizer also implements; the captions
are plain ASCII, so ftfy / unicode differences cannot enter), HF's truncation: <BOS> + the first
max_token_length tokens + <EOS>.

Writes, per max_token_length L in 75, 150, 225: L<L>.te<i>.input_ids [B*n, 77] (kohya's windows),
L<L>.context [B, 75n+2, sum of widths] (encoders concatenated, as the UNet gets it) and, for SDXL,
L<L>.pooled [B, P]; for SD 1.x also L225.clip_skip2.context (clip_skip 2 in every window).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_lib as ol  # noqa: E402
from make_lora_fixture import build_text_encoders  # noqa: E402
from make_parity_fixture import sha256_file  # noqa: E402

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

BOS, EOS = 49406, 49407
WINDOW = 77  # tokenizer.model_max_length
LENGTHS = (75, 150, 225)
WORDS = ("red blue green photo cat dog tree house sky river girl boy hat shoe car road light "
         "dark city night day sun moon star").split()


def word_caption(tokens):
    """A caption of exactly `tokens` BPE tokens (single-token words, checked)."""
    from open_clip.tokenizer import SimpleTokenizer
    words = [WORDS[i % len(WORDS)] for i in range(tokens)]
    text = " ".join(words)
    assert len(SimpleTokenizer().encode(text)) == tokens, text
    return text


# Edge cases of the windows: empty, short (padding windows), the <EOS> in the last slot of
# window 1 (74), the <EOS> opening window 2 (75), mid window 2, exactly two windows (150), mid
# window 3, and truncation at every length (300).
CAPTIONS = ["", "a photo of a cat sitting on a red mat"] + \
    [word_caption(n) for n in (74, 75, 100, 150, 180, 300)]


def tokenize(captions, length, pad):
    """HF CLIPTokenizer(padding="max_length", truncation=True, max_length=length) ids:
    <BOS> tokens[:length-2] <EOS> then pad. open_clip.tokenize does the same with pad 0."""
    import open_clip
    ids = open_clip.tokenize(captions, context_length=length).long()
    if pad != 0:
        for row in ids:
            eot = int((row == EOS).nonzero()[0])
            row[eot + 1:] = pad
    return ids


def kohya_windows(ids, pad):
    """kohya TokenizeStrategy._get_input_ids for one caption: [n, 77]."""
    max_length = ids.shape[0]
    if max_length <= WINDOW:
        return ids.unsqueeze(0)
    chunks = []
    for i in range(1, max_length - WINDOW + 2, WINDOW - 2):
        chunk = torch.cat((ids[0].unsqueeze(0), ids[i:i + WINDOW - 2], ids[-1].unsqueeze(0)))
        if pad != EOS:  # v2 / SDXL
            if chunk[-2] != EOS and chunk[-2] != pad:
                chunk[-1] = EOS
            if chunk[1] == pad:
                chunk[1] = EOS
        chunks.append(chunk)
    return torch.stack(chunks)


def join_windows(hidden, b):
    """kohya's join: [b*n, 77, d] -> [b, n*75 + 2, d] (<BOS>, each window's 75, the last)."""
    hidden = hidden.reshape(b, -1, hidden.shape[-1])
    max_token_length = hidden.shape[1]
    if max_token_length == WINDOW:
        return hidden
    states = [hidden[:, 0].unsqueeze(1)]
    for i in range(1, max_token_length, WINDOW):
        states.append(hidden[:, i:i + WINDOW - 2])
    states.append(hidden[:, -1].unsqueeze(1))
    return torch.cat(states, dim=1)


def pool_workaround(model, last_hidden_state, ids):
    """kohya _pool_workaround: the state at the first <EOS> of each row, @ text_projection."""
    eos_index = torch.argmax((ids == EOS).int(), dim=1)
    pooled = last_hidden_state[torch.arange(last_hidden_state.shape[0]), eos_index]
    return model.text_projection(pooled)


def selected_hidden(te, model, out, clip_skip):
    """The family's layer (clip_skip 0) or kohya's hidden_states[-clip_skip] + final LN."""
    final_ln = getattr(model, "text_model", model).final_layer_norm
    if clip_skip:
        return final_ln(out.hidden_states[-clip_skip])
    hidden = out.hidden_states[-te.hidden_layer_from_end]
    return final_ln(hidden) if te.apply_final_layer_norm else hidden


@torch.no_grad()
def encode(spec, encoders, length, clip_skip, out, prefix):
    b = len(CAPTIONS)
    hidden = []
    for i, (te, model) in enumerate(zip(spec.text_encoders, encoders)):
        ids = torch.cat([kohya_windows(row, te.pad_token)
                         for row in tokenize(CAPTIONS, length + 2, te.pad_token)])
        assert ids.shape == (b * (length // 75), WINDOW), ids.shape
        enc = model(input_ids=ids, output_hidden_states=True)
        hidden.append(join_windows(selected_hidden(te, model, enc, clip_skip), b))
        if not clip_skip:
            out[f"{prefix}.te{i}.input_ids"] = ids
        if spec.sdxl and i == len(encoders) - 1:
            pool2 = pool_workaround(model, enc.last_hidden_state, ids)
            # transformers pools at the first eos_token_id too: the same numbers.
            assert torch.allclose(pool2, enc.text_embeds, atol=1e-6)
            out[f"{prefix}.pooled"] = pool2[::length // 75]
    out[f"{prefix}.context"] = torch.cat(hidden, dim=-1)
    assert out[f"{prefix}.context"].shape[1] == 75 * (length // 75) + 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", required=True, choices=sorted(ol.PRESETS))
    ap.add_argument("--checkpoint", required=True, help="lorafleet-make-checkpoint output")
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    spec = ol.PRESETS[args.preset]
    with safe_open(args.checkpoint, "pt") as f:
        file_meta = f.metadata() or {}
    ckpt = ol.RecordingDict(load_file(args.checkpoint))
    encoders = build_text_encoders(spec, ckpt)

    out = {}
    for length in LENGTHS:
        encode(spec, encoders, length, 0, out, f"L{length}")
    if not spec.sdxl and spec.text_encoders[0].layout == "hf":
        encode(spec, encoders, 225, 2, out, "L225.clip_skip2")
    meta = {"preset": spec.name, "checkpoint_sha256": sha256_file(args.checkpoint),
            "checkpoint_seed": file_meta.get("lorafleet.seed", ""),
            "captions": json.dumps(CAPTIONS), "lengths": ",".join(map(str, LENGTHS)),
            "generator": "tests/oracle/make_long_caption_fixture.py"}
    out = {k: v.detach().contiguous() for k, v in out.items()}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    save_file(out, args.output, metadata=meta)
    print(f"{args.output}: {len(out)} tensors")


if __name__ == "__main__":
    main()
