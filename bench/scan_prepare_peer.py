#!/usr/bin/env python3
"""The peer of lorafleet-bench-scan-prepare: the same per-image work done the way kohya
sd-scripts does it (library/train_util.py load_image, BucketManager.select_bucket,
trim_and_resize_if_required): Pillow open + ImageOps.exif_transpose + convert("RGB"), numpy,
the bucket choice of select_bucket over make_bucket_resolutions((512, 512), 256, 1024, 64),
cv2.resize INTER_AREA when neither side grows else PIL LANCZOS, centre crop by numpy slicing.

usage: scan_prepare_peer.py --dir DIR [--threads N] [--repeats R] [--pool process|thread]
                            [--dump FILE]
Prints one JSON line with the keys of the C++ benchmark (impl "kohya-pillow").
"""
import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
import PIL
from PIL import Image, ImageOps

EXTS = (".png", ".jpg", ".jpeg", ".webp", ".bmp")


# kohya library/model_util.py make_bucket_resolutions
def make_bucket_resolutions(max_reso, min_size=256, max_size=1024, divisible=64):
    max_width, max_height = max_reso
    max_area = max_width * max_height
    resos = set()
    width = int(math.sqrt(max_area) // divisible) * divisible
    resos.add((width, width))
    width = min_size
    while width <= max_size:
        height = min(max_size, int((max_area // width) // divisible) * divisible)
        if height >= min_size:
            resos.add((width, height))
            resos.add((height, width))
        width += divisible
    return sorted(resos)


RESOS = make_bucket_resolutions((512, 512))
RESOS_SET = set(RESOS)
ASPECTS = np.array([w / h for w, h in RESOS])


# kohya BucketManager.select_bucket (upscale mode, predefined buckets)
def select_bucket(image_width, image_height):
    aspect_ratio = image_width / image_height
    reso = (image_width, image_height)
    if reso not in RESOS_SET:
        reso = RESOS[np.abs(ASPECTS - aspect_ratio).argmin()]
    ar_reso = reso[0] / reso[1]
    if aspect_ratio > ar_reso:
        scale = reso[1] / image_height
    else:
        scale = reso[0] / image_width
    resized = (int(image_width * scale + 0.5), int(image_height * scale + 0.5))
    return reso, resized


def work(path):
    with Image.open(path) as image:
        image = ImageOps.exif_transpose(image)
        if image.mode != "RGB":
            image = image.convert("RGB")
        img = np.array(image, np.uint8)
    h, w = img.shape[:2]
    reso, (rw, rh) = select_bucket(w, h)
    # kohya resize_image: area when neither side grows, else PIL LANCZOS
    if w >= rw and h >= rh:
        img = cv2.resize(img, (rw, rh), interpolation=cv2.INTER_AREA)
    else:
        img = np.array(Image.fromarray(img).resize((rw, rh), Image.LANCZOS))
    if rw > reso[0]:
        p = (rw - reso[0]) // 2
        img = img[:, p:p + reso[0]]
    if rh > reso[1]:
        p = (rh - reso[1]) // 2
        img = img[p:p + reso[1]]
    assert img.shape[0] == reso[1] and img.shape[1] == reso[0], f"bad size {img.shape} for {reso}"
    return reso, (rw, rh), float(img.mean())


def init_worker():
    cv2.setNumThreads(1)  # parallelism from the N workers only, as the C++ side


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pool", choices=["process", "thread"], default="process")
    ap.add_argument("--dump")
    a = ap.parse_args()
    files = sorted(os.path.join(a.dir, f) for f in os.listdir(a.dir) if f.lower().endswith(EXTS))
    if not files:
        sys.exit(f"{a.dir}: no images")
    init_worker()
    if a.pool == "process":
        pool = mp.get_context("fork").Pool(a.threads, initializer=init_worker)
        run = lambda: pool.map(work, files, chunksize=1)
    else:
        ex = ThreadPoolExecutor(a.threads)
        run = lambda: list(ex.map(work, files))
    results = run()  # warm-up: page cache, worker start, imports
    best = math.inf
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        results = run()
        best = min(best, time.perf_counter() - t0)
    digest = sum(b[0] * 1000003 + b[1] * 1009 + r[0] * 31 + r[1] for b, r, _ in results)
    if a.dump:
        with open(a.dump, "w") as f:
            for path, (b, r, m) in zip(files, results):
                f.write(f"{os.path.basename(path)} {b[0]} {b[1]} {r[0]} {r[1]} {m}\n")
    print(json.dumps({"impl": "kohya-pillow", "images": len(files), "threads": a.threads,
                      "repeats": a.repeats, "pool": a.pool, "seconds": round(best, 4),
                      "images_per_s": round(len(files) / best, 2), "bucket_digest": digest,
                      "pillow": PIL.__version__, "opencv": cv2.__version__,
                      "numpy": np.__version__}))
    if a.pool == "process":
        pool.close()
        pool.join()


if __name__ == "__main__":
    main()
