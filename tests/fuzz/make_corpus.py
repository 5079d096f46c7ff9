#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small valid
inputs, one per layout the parser knows, so libFuzzer starts from the interesting structure.
Needs numpy and Pillow (the .venv of scripts/install_deps.sh plus `pip install pillow`). The output is
committed; rerun after adding a seed: .venv/bin/python tests/fuzz/make_corpus.py"""
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


if __name__ == "__main__":
    main()
    coordinator_handlers()
