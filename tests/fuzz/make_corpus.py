#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small valid
inputs, one per layout the parser knows, so libFuzzer starts from the interesting structure.
Needs numpy and Pillow (the .venv of scripts/install_deps.sh plus `pip install pillow`). The output is
committed; rerun after adding a seed: .venv/bin/python tests/fuzz/make_corpus.py [TARGET...]"""
import io
import json
import pathlib
import struct

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"
REPO = pathlib.Path(__file__).resolve().parents[2]


def put(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None, pad=0):
    """The format of huggingface/safetensors: u64 LE header size, JSON header, byte buffer."""
    header, buf = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(buf), len(buf) + len(raw)]}
        buf += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode() + b" " * pad
    return struct.pack("<Q", len(h)) + h + buf


def image(fmt, w, h, exif=False, alpha=False):
    a = (np.arange(w * h * 3) % 251).astype(np.uint8).reshape(h, w, 3)
    im = Image.fromarray(a).convert("RGBA" if alpha else "RGB")
    out = io.BytesIO()
    kw = {}
    if exif:
        e = Image.Exif()
        e[0x0112] = 6  # orientation: rotate 90
        kw["exif"] = e.tobytes()
    im.save(out, format=fmt, **kw)
    return out.getvalue()


def varint(n):
    n &= (1 << 64) - 1  # negative int32/int64 as protobuf encodes them: 10 bytes
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def message(**fields):
    """A protobuf message from {"f<number>": value}: int/bool varint, float double, str bytes."""
    out = b""
    for key, v in fields.items():
        num = int(key[1:])
        if isinstance(v, float):
            out += varint(num << 3 | 1) + struct.pack("<d", v)
        elif isinstance(v, (str, bytes)):
            raw = v.encode() if isinstance(v, str) else v
            out += varint(num << 3 | 2) + varint(len(raw)) + raw
        else:
            out += varint(num << 3) + varint(int(v))
    return out


def rpc_calls(*calls):
    """coordinator_handlers_fuzzer input: [method][u16 LE length][message] per call. Methods:
    0 Register, 1 GetDataset, 2 GetEpochPlan, 3 ReportProgress, 4 CommitCheckpoint, 5 Finish."""
    return b"".join(bytes([m]) + struct.pack("<H", len(body)) + body for m, body in calls)


def coordinator_handlers():
    reg = lambda rank, ws: (0, message(f1=rank, f2=ws))
    put("coordinator_handlers", "one_rank_job", rpc_calls(
        reg(0, 1), (1, b""), (2, message(f1=0)),
        (3, message(f1=0, f2=1, f3=0, f4=0.5, f5=1e-4, f6=1, f9=1)),
        (4, message(f1=0, f2=1, f3="/tmp/lf_fuzz_coordinator/out/checkpoints/step-00000001", f4=1)),
        (5, message(f1=0, f2=20, f3=True, f5=1))))
    put("coordinator_handlers", "two_ranks_one_missing", rpc_calls(
        reg(1, 2), (3, message(f1=5, f2=3)), (5, message(f1=0, f3=False, f4="boom", f7=True))))
    put("coordinator_handlers", "huge_counts", rpc_calls(
        reg(0, 1), (2, message(f1=2147483647, f2=1)), (2, message(f1=-1, f2=-7)),
        (3, message(f1=0, f2=(1 << 62), f3=-1, f6=(1 << 62), f9=1)),
        (4, message(f1=0, f2=-5, f3="", f4=99))))


def main():
    f32 = np.arange(6, dtype=np.float32).tobytes()
    put("safetensors", "one_f32", safetensors({"w": ("F32", [2, 3], f32)}))
    put("safetensors", "lora_pair", safetensors({
        "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": ("F16", [4, 8], b"\0" * 64),
        "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": ("F16", [8, 4], b"\0" * 64),
        "lora_unet_down_blocks_0_attentions_0_proj_in.alpha": ("F32", [], b"\0\0\x80\x40"),
    }, {"ss_network_dim": "4", "ss_network_alpha": "4.0"}))
    put("safetensors", "padded_bf16", safetensors({"b": ("BF16", [3], b"\0" * 6)}, pad=5))
    put("safetensors", "empty_and_scalar", safetensors({
        "e": ("I64", [0], b""), "s": ("U8", [], b"\x07"), "f8": ("F8_E4M3", [2], b"\1\2")}))
    put("safetensors", "metadata_only", safetensors({}, {"format": "pt"}))

    put("image_header", "rgb.png", image("PNG", 5, 3))
    put("image_header", "rgba.png", image("PNG", 4, 4, alpha=True))
    put("image_header", "exif.jpg", image("JPEG", 8, 6, exif=True))
    put("image_header", "plain.jpg", image("JPEG", 3, 2))
    put("image_header", "lossy.webp", image("WEBP", 6, 4))
    put("image_header", "exif.webp", image("WEBP", 6, 4, exif=True))
    out = io.BytesIO()
    Image.new("RGB", (5, 3)).save(out, format="WEBP", lossless=True)
    put("image_header", "lossless.webp", out.getvalue())
    put("image_header", "rgb.bmp", image("BMP", 5, 3))

    # caption: 4 option bytes, then the file's content (caption_fuzzer.cpp).
    put("caption", "tags", b"\x11\x02\x00\x00" + b"1girl, solo, red hair, smile")
    put("caption", "bom_crlf", b"\x01\x00\x00\x00" + b"\xef\xbb\xbfa photo\r\nsecond line\r\n")
    put("caption", "keep_sep", b"\x03\x06\x05\x25" + b"sks person ||| smiling, outdoors ||| hi")
    put("caption", "utf8", "\x00\x00\x00\x00写真, café, 🙂".encode())
    put("caption", "utf16", b"\x00\x00\x00\x00\xff\xfea\x00b\x00")
    put("caption", "empty", b"\x00\x00\x00\x00 \n\t\n")

    put("job_yaml", "demo.yaml", (REPO / "configs/demo.yaml").read_bytes())
    put("job_yaml", "sdxl.yaml", (REPO / "configs/examples/sdxl_bf16_24gb.yaml").read_bytes())
    put("job_yaml", "datasets_list.yaml", """model:
  pretrained_model_name_or_path: /m/base.safetensors
  architecture: tiny
datasets:
  - train_data_dir: /d/train
    resolution: [512, 768]
    enable_bucket: true
network:
  network_dim: 8
  network_alpha: 4
  network_args: {conv_dim: 4, down_lr_weight: sine+0.1}
training:
  optimizer_type: Prodigy
  optimizer_args: ["d_coef=0.5", "use_bias_correction=True"]
  lr_scheduler: cosine_with_restarts
  lr_warmup_steps: 0.1
  max_train_epochs: 3
output:
  output_dir: /o
  save_every_n_steps: 10
""")

    put("dataset_toml", "subsets.toml", """[general]
shuffle_caption = true
caption_extension = ".txt"
keep_tokens = 1

[[datasets]]
resolution = 512
batch_size = 2

  [[datasets.subsets]]
  image_dir = "/d/img"
  class_tokens = "sks person"
  num_repeats = 10

  [[datasets.subsets]]
  is_reg = true
  image_dir = "/d/reg"
  class_tokens = "person"
""")
    put("dataset_toml", "buckets.toml", """[[datasets]]
resolution = [768, 512]
enable_bucket = true
min_bucket_reso = 256
max_bucket_reso = 1024
bucket_reso_steps = 64
validation_split = 0.1

  [[datasets.subsets]]
  image_dir = "/d/a"
  caption_prefix = "pre"
  flip_aug = true
""")

    put("kohya_training_toml", "train.toml", """[model_arguments]
pretrained_model_name_or_path = "/m/base.safetensors"

[dataset_arguments]
dataset_config = "dataset.toml"

[network_arguments]
network_module = "networks.lora"
network_dim = 16
network_alpha = 8
network_args = ["conv_dim=4", "conv_alpha=1"]

[optimizer_arguments]
optimizer_type = "AdamW"
learning_rate = 1e-4
lr_scheduler = "cosine"
lr_warmup_steps = 10

[training_arguments]
output_dir = "/o"
output_name = "lora"
max_train_steps = 100
save_model_as = "safetensors"
mixed_precision = "bf16"
sample_sampler = "euler_a"
""")

    put("sample_prompts", "demo.txt", b"\x00" + (REPO / "configs/demo_prompts.txt").read_bytes())
    put("sample_prompts", "options.txt",
        b"\x00a cat --n blurry --w 200 --h 128 --d 42 --l 7.5 --s 20 --ss euler_a\n# comment\n")
    put("sample_prompts", "prompts.toml", b"\x01" + b"""[prompt]
width = 512
height = 512
sample_steps = 20

[[prompt.subset]]
prompt = "a dog"
negative_prompt = "bad"
seed = 3
""")
    put("sample_prompts", "prompts.json",
        b"\x02" + json.dumps([{"prompt": "a bird", "width": 320, "sample_steps": 5}]).encode())


def lora_tensors(modules, dtype="F32"):
    """{name + suffix: (dtype, shape, bytes)} from {name: {suffix: shape}}; values are small
    ramps (alpha / scale: the scalar given instead of a shape)."""
    size = {"F32": 4, "F16": 2, "BF16": 2}[dtype]
    out = {}
    for name, parts in modules.items():
        for suffix, shape in parts.items():
            if isinstance(shape, float):
                out[name + suffix] = ("F32", [], struct.pack("<f", shape))
                continue
            n = int(np.prod(shape))
            ramp = ((np.arange(n) % 7) - 3).astype(np.float32) / 64
            raw = ramp.astype(np.float16).tobytes() if dtype == "F16" else ramp.tobytes()
            if dtype == "BF16":
                raw = (ramp.view(np.uint32) >> 16).astype(np.uint16).tobytes()
            assert len(raw) == n * size
            out[name + suffix] = (dtype, shape, raw)
    return out


def lora_file():
    """lora_file_fuzzer inputs: [network byte][a LoRA .safetensors], one per layout, each naming
    a few modules of the network the byte picks (lora_file_fuzzer.cpp) with its shapes, so
    every seed loads (the file may leave modules out)."""
    blk = "down_blocks_0_attentions_0_transformer_blocks_0_"
    q, k = "lora_unet_" + blk + "attn1_to_q", "lora_unet_" + blk + "attn2_to_k"
    proj_in, conv1 = "lora_unet_down_blocks_0_attentions_0_proj_in", "lora_unet_down_blocks_0_resnets_0_conv1"
    fc1 = "lora_te_text_model_encoder_layers_0_mlp_fc1"
    lora = lambda down, up, alpha=2.0: {".lora_down.weight": down, ".lora_up.weight": up, ".alpha": alpha}
    kohya_meta = {"ss_network_module": "networks.lora", "ss_network_dim": "4", "ss_network_alpha": "2.0"}

    def seed(name, network, tensors, metadata=None):
        put("lora_file", name, bytes([network]) + safetensors(tensors, metadata))

    seed("kohya_lora", 0, lora_tensors({
        proj_in: lora([4, 32, 1, 1], [32, 4, 1, 1]), q: lora([4, 32], [32, 4]),
        k: lora([4, 64], [32, 4], 1.0), fc1: lora([4, 64], [128, 4])}), kohya_meta)
    # Bit 7: the target recomputes the data offsets (these are right already).
    seed("kohya_lora_offsets_recomputed", 0x80, lora_tensors({
        q: lora([4, 32], [32, 4]), k: lora([4, 64], [32, 4], 1.0)}), kohya_meta)
    seed("kohya_fp16_linear_proj_in_no_alpha", 0, lora_tensors({
        proj_in: {".lora_down.weight": [4, 32], ".lora_up.weight": [32, 4]}}, "F16"))
    seed("locon_bf16", 0, lora_tensors({conv1: lora([2, 32, 3, 3], [32, 2, 1, 1], 1.0),
                                        q: lora([4, 32], [32, 4])}, "BF16"),
         {**kohya_meta, "ss_network_args": '{"conv_dim": "2", "conv_alpha": "1"}'})
    seed("lycoris_prefix_scale", 0, lora_tensors({
        "lycoris_unet_" + blk + "attn1_to_q": {".lora.down.weight": [4, 32], ".lora.up.weight": [32, 4],
                                               ".scale": 0.5}}))
    peft = "unet.down_blocks.0.attentions.0.transformer_blocks.0."
    seed("peft_diffusers", 0, lora_tensors({
        peft + "attn1.to_q": {".lora_A.weight": [4, 32], ".lora_B.weight": [32, 4]},
        peft + "attn2.to_k": {".lora_A.default.weight": [4, 64], ".lora_B.default.weight": [32, 4]},
        "text_encoder.text_model.encoder.layers.0.mlp.fc1": {".lora_A.weight": [4, 64],
                                                            ".lora_B.weight": [128, 4]},
        "text_encoder.encoder.layers.0.self_attn.q_proj": {".lora_A.weight": [4, 64],
                                                          ".lora_B.weight": [64, 4]}}),
         {"lora_adapter_metadata": json.dumps({
             "unet.r": 4, "unet.lora_alpha": 8, "unet.alpha_pattern": {"attn2.to_k": 2.0},
             "text_encoder.lora_alpha": 4, "text_encoder.use_rslora": True})})
    seed("diffusers_old_processors", 0, lora_tensors({
        "down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_q_lora":
            {".down.weight": [4, 32], ".up.weight": [32, 4]},
        "down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_out_lora":
            {".down.weight": [4, 32], ".up.weight": [32, 4]},
        "unet." + blk.replace("_", ".") + "attn2.to_v.lora_linear_layer":
            {".down.weight": [4, 64], ".up.weight": [32, 4]}}))
    hada = lambda out, r, inp, alpha: {".hada_w1_a": [out, r], ".hada_w1_b": [r, inp],
                                       ".hada_w2_a": [out, r], ".hada_w2_b": [r, inp], ".alpha": alpha}
    seed("lycoris_loha", 1, lora_tensors({q: hada(32, 4, 32, 2.0), conv1: hada(32, 2, 288, 1.0)}),
         {"ss_network_module": "lycoris.kohya", "ss_network_args": '{"algo": "loha"}'})
    lokr = lambda w2_in: {".lokr_w1": [4, 4], ".lokr_w2_a": [8, 2], ".lokr_w2_b": [2, w2_in], ".alpha": 1.0}
    seed("lycoris_lokr", 2, lora_tensors({q: lokr(8), k: lokr(16), conv1: lokr(72)}),
         {"ss_network_module": "lycoris.kohya", "ss_network_args": '{"algo": "lokr", "factor": "4"}'})
    oft = lambda name: {name: {".oft_blocks": [4, 8, 8], ".alpha": 0.01}}
    seed("kohya_oft", 3, lora_tensors({**oft("oft_unet_" + blk + "attn1_to_q"),
                                       **oft("oft_unet_down_blocks_0_resnets_0_conv1")}),
         {"ss_network_module": "networks.oft", "ss_network_dim": "4", "ss_network_alpha": "0.01"})
    sdxl = "unet.down_blocks.1.attentions.0.transformer_blocks.0."
    seed("sdxl_kohya_and_peft", 4, lora_tensors({
        "lora_unet_input_blocks_3_1_proj_in": lora([4, 64], [64, 4]),
        sdxl + "attn2.to_k": {".lora_A.weight": [4, 112], ".lora_B.weight": [64, 4]},
        "lora_te1_text_model_encoder_layers_0_mlp_fc1": lora([4, 48], [96, 4]),
        "text_encoder_2.text_model.encoder.layers.0.self_attn.q_proj": {
            ".lora_A.weight": [4, 64], ".lora_B.weight": [64, 4]}}))
    seed("lycoris_dora", 5, lora_tensors({
        q: {**lora([4, 32], [32, 4]), ".dora_scale": [32, 1]},
        proj_in: {**lora([4, 32, 1, 1], [32, 4, 1, 1]), ".dora_scale": [32, 1, 1, 1]},
        fc1: {**lora([4, 64], [128, 4]), ".dora_scale": [128, 1]}}))


if __name__ == "__main__":
    # With target names (e.g. lora_file), only those; without, every target.
    import sys
    chosen = sys.argv[1:] or ["main", "coordinator_handlers", "lora_file"]
    for target in chosen:
        globals()[target]()
