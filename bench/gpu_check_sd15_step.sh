#!/usr/bin/env bash
# The GPU check of issue #4, as one prepared command for the accelerator machine: an SD 1.5-size
# UNet (random weights), 512x512 images (64x64 latents), batch 4, bf16 weights under bf16
# autocast, LoRA rank 16 (alpha 16) on the 192 UNet modules kohya trains; lorafleet's training
# step against diffusers + peft doing the same step (bench/peer_diffusers_train_step.py),
# alternating, on the same GPU. Records it/s and CUDA peak memory (max allocated) of both and
# prints the ratio table and a verdict against the target (it/s >= peer, memory <= peer).
#
# usage: bench/gpu_check_sd15_step.sh [--cpu-smoke]
#   device run:  command "bench/gpu_check_sd15_step.sh", carry [".whl"], timeout_s 570
#   --cpu-smoke  the same pipeline (wheel unzip, import checks, build, both runs, table, verdict)
#                on the CPU at tiny size, 1 repeat of 3 steps: proves the script without a GPU.
#                Here: PYTHON=.venv/bin/python BUILD_DIR=build-bench bench/gpu_check_sd15_step.sh
#                --cpu-smoke
# Environment: PYTHON (default python3: the device image's, which holds torch 2.11.0+cu130,
# transformers, peft), BUILD_DIR (default build-gpu; configured -DLF_CORE_ONLY=ON, Release, Ninja
# when new), OUT (results folder; the device sets it; default $BUILD_DIR/gpu-check-out), REPEATS
# (3), STEPS (30), WARMUP (5), THREADS (4, intra-op CPU threads of both sides).
#
# The device machine has no diffusers and no network: carry its pure-Python wheel
# (`python3 -m pip download --no-deps diffusers==0.42.1 -d .whl` in the repo root; .whl/ is
# ignored, so name it in carry). Every py3-none-any wheel in .whl/ is unzipped onto PYTHONPATH,
# so a missing pure-Python dependency travels the same way. diffusers 0.42.1's import needs
# Pillow, requests (+ urllib3, certifi, charset_normalizer, idna), regex, safetensors>=0.8.0,
# huggingface_hub>=1.32.0, filelock and numpy; the device image lists all of them (KINDS.md), and
# step 1 stops within seconds naming any that is missing. Results land in $OUT: build.log,
# run.log (stderr of both sides), results.txt (JSON lines + table + verdict), bench-gpu.jsonl.
#
# Time on the device (estimate; the script prints each phase's seconds): imports ~10 s, configure
# ~20 s, build of lf_train_core + the bench with 16 jobs ~2-3 min (cold, no ccache; the PCH and
# lora_network.cpp / lora_variants.cpp are the long poles), 3 x (lorafleet + peer) at sd15 ~1 min
# per pair (setup: random init of 860M parameters on the CPU and Python imports, ~10-15 s a side;
# 35 steps at an expected 0.1-0.3 s) -> about 5-6 min, well inside one 10-minute command.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

smoke=0
case "${1:-}" in
  --cpu-smoke) smoke=1 ;;
  "") ;;
  -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
  *) echo "gpu_check_sd15_step.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac

PY="${PYTHON:-python3}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
OUT_DIR="${OUT:-$BUILD_DIR/gpu-check-out}"
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR/bench-gpu.jsonl"  # run_train_step_bench.sh appends to it
t0=$SECONDS
say() { echo "[gpu-check +$((SECONDS - t0))s] $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

if [ "$smoke" = 1 ]; then
  REPEATS="${REPEATS:-1}" STEPS="${STEPS:-3}" WARMUP="${WARMUP:-1}" THREADS="${THREADS:-1}"
  bench_flags=(--device cpu --dtype bf16 --autocast --preset tiny --batch 2 --latent 32x32
               --network-dim 4 --network-alpha 4)
else
  REPEATS="${REPEATS:-3}" STEPS="${STEPS:-30}" WARMUP="${WARMUP:-5}" THREADS="${THREADS:-4}"
  bench_flags=(--device cuda --dtype bf16 --autocast --preset sd15 --batch 4 --latent 64x64
               --network-dim 16 --network-alpha 16)
fi
bench_flags+=(--warmup "$WARMUP" --steps "$STEPS" --threads "$THREADS")

# ---- 1. Python: the carried wheels on PYTHONPATH, then every import the peer needs ----------
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (set PYTHON)"
site="$(mktemp -d /tmp/lf-pydeps.XXXXXX)"
trap 'rm -rf "$site"' EXIT
shopt -s nullglob
diffusers_whls=("$ROOT"/.whl/diffusers-*.whl)
[ "${#diffusers_whls[@]}" -le 1 ] || die "several diffusers wheels in .whl/: keep one"
for whl in "$ROOT"/.whl/*-py3-none-any.whl; do
  "$PY" -m zipfile -e "$whl" "$site"
  say "unzipped $(basename "$whl") onto PYTHONPATH"
done
shopt -u nullglob
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

"$PY" - <<'EOF' || die "the peer's Python dependencies are incomplete (see above)"
import importlib, importlib.metadata as md, sys
# module -> (distribution, minimum version): what diffusers 0.42.1 (+ peft) import on
# `from diffusers import UNet2DConditionModel, DDPMScheduler`, found by blocking each in turn.
need = {"torch": ("torch", None), "peft": ("peft", None), "transformers": ("transformers", None),
        "PIL": ("Pillow", None), "requests": ("requests", None), "urllib3": ("urllib3", None),
        "certifi": ("certifi", None), "charset_normalizer": ("charset-normalizer", None),
        "idna": ("idna", None), "regex": ("regex", None),
        "safetensors": ("safetensors", "0.8.0"), "huggingface_hub": ("huggingface-hub", "1.32.0"),
        "filelock": ("filelock", None), "numpy": ("numpy", None), "yaml": ("PyYAML", None)}
missing, old = [], []
for mod, (dist, minimum) in need.items():
    try:
        importlib.import_module(mod)
    except Exception as e:  # ImportError, or a broken install
        missing.append(f"{dist} ({type(e).__name__}: {e})")
        continue
    if minimum:
        from packaging.version import Version
        have = md.version(dist)
        if Version(have) < Version(minimum):
            old.append(f"{dist} {have} < {minimum}")
for m in missing:
    print(f"missing: {m}", file=sys.stderr)
for o in old:
    print(f"too old: {o}", file=sys.stderr)
if missing or old:
    print("carry pure-Python wheels of these in .whl/ (py3-none-any; Pillow is compiled: a "
          "cp312 manylinux wheel would need pip --target instead)", file=sys.stderr)
    sys.exit(1)
try:
    import diffusers, peft, torch
    from diffusers import DDPMScheduler, UNet2DConditionModel  # noqa: F401
    from peft import LoraConfig  # noqa: F401
except Exception as e:
    print(f"cannot import diffusers/peft: {type(e).__name__}: {e}; carry "
          "diffusers-0.42.1-py3-none-any.whl in .whl/", file=sys.stderr)
    sys.exit(1)
print(f"python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}, "
      f"available {torch.cuda.is_available()}), diffusers {diffusers.__version__} from "
      f"{diffusers.__file__}, peft {peft.__version__}", file=sys.stderr)
EOF
if [ "$smoke" = 0 ]; then
  "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' ||
    die "torch.cuda.is_available() is false"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2 || true
fi

# ---- 2. Build only the bench target --------------------------------------------------------
say "build in $BUILD_DIR (log: $OUT_DIR/build.log)"
: > "$OUT_DIR/build.log"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  torch_dir="$("$PY" -c 'import os, torch
print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')"
  cuda=()
  # cmake/lf_torch.cmake points TorchConfig at /usr/local/cuda; elsewhere, at the nvcc on PATH.
  if [ ! -x /usr/local/cuda/bin/nvcc ] && command -v nvcc >/dev/null; then
    cuda=(-DCUDAToolkit_ROOT="$(dirname "$(dirname "$(command -v nvcc)")")")
  fi
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  # Only TorchConfig's arch list; nothing here compiles CUDA code, this just skips autodetection.
  TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" cmake -S "$ROOT" -B "$BUILD_DIR" \
    "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLF_CORE_ONLY=ON -DLF_BUILD_TESTS=OFF \
    -DTorch_DIR="$torch_dir" "${cuda[@]}" >> "$OUT_DIR/build.log" 2>&1 ||
    { tail -n 30 "$OUT_DIR/build.log" >&2; die "cmake configure"; }
  say "configured"
fi
if [ "$smoke" = 0 ] && ! grep -q '^C10_CUDA_LIBRARY:FILEPATH=/' "$BUILD_DIR/CMakeCache.txt"; then
  die "LibTorch without c10_cuda in $BUILD_DIR: the bench could not report CUDA peak memory"
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target lorafleet-bench-train-step \
  >> "$OUT_DIR/build.log" 2>&1 || { tail -n 30 "$OUT_DIR/build.log" >&2; die "build"; }
say "built"

# ---- 3. Both sides, alternating, and the table ---------------------------------------------
say "run: --repeats $REPEATS ${bench_flags[*]}"
PEER_PYTHON="$PY" BUILD_DIR="$BUILD_DIR" BENCH_OUT="$OUT_DIR/bench-gpu.jsonl" \
  "$ROOT/bench/run_train_step_bench.sh" --repeats "$REPEATS" "${bench_flags[@]}" \
  2> >(tee -a "$OUT_DIR/run.log" >&2) | tee "$OUT_DIR/results.txt"

# ---- 4. Verdict against the issue's target -------------------------------------------------
"$PY" - "$OUT_DIR/bench-gpu.jsonl" <<'EOF' | tee -a "$OUT_DIR/results.txt"
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
med = lambda impl, k: statistics.median(r[k] for r in runs if r["impl"] == impl)
speed = med("lorafleet", "steps_per_s") / med("diffusers", "steps_per_s")
mem = med("lorafleet", "peak_mem_mib") / med("diffusers", "peak_mem_mib")
kind = runs[0]["peak_mem_kind"]
speed_word = "parity or better" if speed >= 1 else "BELOW parity"
mem_word = "no more" if mem <= 1 else "MORE"
print(f"verdict: it/s lorafleet/peer {speed:.3f} ({speed_word}); peak memory ({kind}) "
      f"lorafleet/peer {mem:.3f} ({mem_word} than the peer)")
EOF
say "done; results in $OUT_DIR"
