#!/usr/bin/env bash
# The GPU check of issue 11, one prepared command for the accelerator machine (one H200, cold
# build, under 8 minutes):
#   1. the SD 1.5-size LoRA step at 512x512 (64x64 latents), batch 4, bf16 weights under bf16
#      autocast, rank 16, against diffusers + peft eager, with gradient checkpointing off and on:
#      it/s and CUDA peak memory of both (targets: it/s >= 1.1x the peer, memory <= the peer's);
#   2. an SDXL-size step at 1024x1024, batch 1, bf16 with gradient checkpointing, the caching
#      allocator capped at 24 GiB: it must fit; prints it/s;
#   3. the same SDXL step with worker.vram_budget_gb 8 (and the allocator capped at 8 GiB): it
#      must fit; prints it/s and the ratio to step 2 (target >= 0.5x);
#   4. a real 30-step job on CUDA: lorafleet-coordinator + one NCCL rank (env launcher) on demo
#      photos with the tiny model, bf16 and gradient checkpointing: the loss is finite and the
#      LoRA loads in diffusers (tests/oracle/make_lora_fixture.py --check-only: every key).
#
# usage: bench/gpu_check.sh [--cpu-smoke]
#   prepare here:  python3 -m pip download --no-deps diffusers==0.42.1 -d .whl
#                  bench/gpu_bundle.sh                      (programs + libraries for step 4)
#   device run:    command "bash bench/gpu_check.sh", carry [".whl", ".gpu-bundle.tar.xz"],
#                  timeout_s 540
#   --cpu-smoke    the same pipeline on the CPU at tiny size (steps 2 and 3 skipped: they need
#                  CUDA), to prove the script here.
# Environment: PYTHON (default python3, the device image's: torch 2.11.0+cu130, transformers,
# peft), BUILD_DIR (default build-gpu, -DLF_CORE_ONLY=ON), OUT (results; the device sets it),
# STEPS, WARMUP.
# Results in $OUT: build.log, step<N>.log, results.txt (tables, JSON lines, verdicts).
#
# Time on the H200 (estimate; each phase prints its seconds): imports 10 s, configure + build of
# the core and the bench with 16 jobs ~2.5 min, step 1 4 runs x ~25 s, steps 2 and 3 ~40 s each
# (an SDXL UNet's random init on the CPU dominates), step 4 ~30 s.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
smoke=0
case "${1:-}" in
  --cpu-smoke) smoke=1 ;;
  "") ;;
  -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
  *) echo "gpu_check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
PY="${PYTHON:-python3}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
OUT_DIR="${OUT:-$BUILD_DIR/gpu-check-out}"
mkdir -p "$OUT_DIR"
results="$OUT_DIR/results.txt"
: > "$results"
t0=$SECONDS
say() { echo "[gpu-check +$((SECONDS - t0))s] $*" | tee -a "$results" >&2; }
die() { say "FAILED: $*"; exit 1; }
if [ "$smoke" = 1 ]; then
  device=cpu STEPS="${STEPS:-3}" WARMUP="${WARMUP:-1}"
  step1=(--preset tiny --batch 2 --latent 32x32 --network-dim 4 --network-alpha 4)
else
  device=cuda STEPS="${STEPS:-20}" WARMUP="${WARMUP:-3}"
  step1=(--preset sd15 --batch 4 --latent 64x64 --network-dim 16 --network-alpha 16)
fi
common=(--device "$device" --dtype bf16 --autocast --warmup "$WARMUP" --steps "$STEPS" --threads 4)

# ---- 0. Python: carried wheels on PYTHONPATH, the peer's imports ------------------------------
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (set PYTHON)"
site="$(mktemp -d /tmp/lf-pydeps.XXXXXX)"
work="$(mktemp -d /tmp/lf-gpu-job.XXXXXX)"
trap 'rm -rf "$site" "$work"' EXIT
shopt -s nullglob
for whl in "$ROOT"/.whl/*-py3-none-any.whl; do "$PY" -m zipfile -e "$whl" "$site"; done
shopt -u nullglob
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import diffusers, peft, transformers, safetensors, yaml' ||
  die "the peer needs diffusers, peft, transformers, safetensors, PyYAML (carry diffusers' wheel in .whl/)"
if [ "$smoke" = 0 ]; then
  "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' ||
    die "torch.cuda.is_available() is false"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$results"
fi
say "python ready"

# ---- 1. Build the core and the bench (LibTorch from the image's torch wheel) ------------------
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  torch_dir="$("$PY" -c 'import os, torch; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')"
  cuda=()
  if [ ! -x /usr/local/cuda/bin/nvcc ] && command -v nvcc >/dev/null; then
    cuda=(-DCUDAToolkit_ROOT="$(dirname "$(dirname "$(command -v nvcc)")")")
  fi
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DLF_CORE_ONLY=ON -DLF_BUILD_TESTS=OFF -DTorch_DIR="$torch_dir" \
    "${cuda[@]}" > "$OUT_DIR/build.log" 2>&1 || { tail -n 30 "$OUT_DIR/build.log" >&2; die "configure"; }
fi
if [ "$smoke" = 0 ] && ! grep -q '^C10_CUDA_LIBRARY:FILEPATH=/' "$BUILD_DIR/CMakeCache.txt"; then
  die "LibTorch without c10_cuda in $BUILD_DIR"
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target lorafleet-bench-train-step >> "$OUT_DIR/build.log" 2>&1 ||
  { tail -n 30 "$OUT_DIR/build.log" >&2; die "build"; }
bench="$BUILD_DIR/bench/lorafleet-bench-train-step"
say "built"

# ---- 2. Step 1: SD 1.5 vs diffusers + peft, gradient checkpointing off and on -----------------
for ckpt in "" --gradient-checkpointing; do
  say "step 1: ${step1[*]} ${ckpt:-(no checkpointing)}"
  PEER_PYTHON="$PY" BUILD_DIR="$BUILD_DIR" BENCH_OUT="$OUT_DIR/step1.jsonl" \
    "$ROOT/bench/run_train_step_bench.sh" "${common[@]}" "${step1[@]}" $ckpt \
    2>> "$OUT_DIR/step1.log" | tee -a "$results"
done

# ---- 3. Steps 2 and 3: SDXL at 1024x1024 in 24 GiB, then within an 8 GiB budget --------------
if [ "$smoke" = 0 ]; then
  sdxl=(--preset sdxl --batch 1 --latent 128x128 --network-dim 16 --network-alpha 16
        --gradient-checkpointing "${common[@]}")
  say "step 2: ${sdxl[*]} --memory-cap-gb 24"
  "$bench" "${sdxl[@]}" --memory-cap-gb 24 2>> "$OUT_DIR/step2.log" | tee "$OUT_DIR/step2.jsonl" |
    tee -a "$results" || die "step 2: the SDXL step did not fit in 24 GiB (see step2.log)"
  say "step 3: ${sdxl[*]} --vram-budget-gb 8 --memory-cap-gb 8"
  "$bench" "${sdxl[@]}" --vram-budget-gb 8 --memory-cap-gb 8 2>> "$OUT_DIR/step3.log" |
    tee "$OUT_DIR/step3.jsonl" | tee -a "$results" ||
    die "step 3: the SDXL step did not fit in an 8 GiB budget (see step3.log)"
fi

# ---- 4. A real job: coordinator + one NCCL rank, 30 steps ---------------------------------------
bundle="$ROOT/.gpu-bundle.tar.xz"
[ -f "$bundle" ] || die "no $bundle: run bench/gpu_bundle.sh here and carry it"
tar -C "$work" -xJf "$bundle"
b="$work/.gpu-bundle"
torch_lib="$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
nvidia_libs="$("$PY" - <<'EOF'
import glob, os, site
dirs = [d for p in site.getsitepackages() for d in glob.glob(os.path.join(p, "nvidia", "*", "lib"))]
print(":".join(dirs))
EOF
)"
export LD_LIBRARY_PATH="$b/lib:$torch_lib:$nvidia_libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$b/bin/lorafleet-make-checkpoint" --preset tiny --seed 1234 --output "$work/base.safetensors" \
  > "$OUT_DIR/step4.log" 2>&1 || { tail -n 20 "$OUT_DIR/step4.log" >&2; die "step 4: make-checkpoint"; }
port=$((20000 + RANDOM % 20000))
cat > "$work/job.yaml" <<YAML
model:
  pretrained_model_name_or_path: $work/base.safetensors
  architecture: tiny
  tokenizer_vocab: $b/data/bpe_simple_vocab_16e6.txt.gz
dataset:
  train_data_dir: $b/data/train
  resolution: 256
  min_bucket_reso: 128
  max_bucket_reso: 512
  caption_extension: .txt
network:
  network_dim: 4
  network_alpha: 1.0
training:
  seed: 42
  train_batch_size: 2
  learning_rate: 1.0e-3
  max_train_steps: 30
  save_every_n_steps: 10
  mixed_precision: $([ "$smoke" = 1 ] && echo no || echo bf16)
  gradient_checkpointing: true
output:
  output_dir: $work/run
  output_name: gpu_check
coordinator:
  listen_address: 127.0.0.1:$port
  metrics_address: ""
worker:
  device: $device
  metrics_port_base: 0
cluster:
  world_size: 1
YAML
say "step 4: 30-step job on $device (coordinator + 1 rank, env launcher)"
"$b/bin/lorafleet-coordinator" --config "$work/job.yaml" >> "$OUT_DIR/step4.log" 2>&1 &
coord=$!
sleep 1
LF_RANK=0 LF_WORLD_SIZE=1 "$b/bin/lorafleet-worker" --launcher env --no-progress-bar \
  --coordinator "127.0.0.1:$port" --verify-sync-every 1 >> "$OUT_DIR/step4.log" 2>&1 ||
  { tail -n 30 "$OUT_DIR/step4.log" >&2; die "step 4: the job failed"; }
wait "$coord" || die "step 4: the coordinator failed"
grep -E "collectives|frozen weights|peak memory|trained" "$OUT_DIR/step4.log" | tee -a "$results" || true
"$PY" - "$OUT_DIR/step4.log" <<'EOF' | tee -a "$results" || die "step 4: loss"
import math, re, sys
losses = [float(m) for m in re.findall(r"sync check global_step \d+ loss (\S+)", open(sys.argv[1]).read())]
assert len(losses) == 30 and all(math.isfinite(x) for x in losses), losses
print(f"step 4: 30 losses, all finite (first {losses[0]:.4f}, last {losses[-1]:.4f})")
EOF
HF_HUB_OFFLINE=1 "$PY" "$ROOT/tests/oracle/make_lora_fixture.py" --preset tiny \
  --checkpoint "$work/base.safetensors" --lora "$work/run/gpu_check.safetensors" --check-only \
  2>> "$OUT_DIR/step4.log" | tee -a "$results" ||
  { tail -n 30 "$OUT_DIR/step4.log" >&2; die "step 4: diffusers could not load the LoRA"; }

# ---- Verdicts -----------------------------------------------------------------------------------
"$PY" - "$OUT_DIR" "$smoke" <<'EOF' | tee -a "$results"
import json, os, statistics, sys
out, smoke = sys.argv[1], sys.argv[2] == "1"
runs = [json.loads(l) for l in open(os.path.join(out, "step1.jsonl")) if l.startswith("{")]
for ckpt in (False, True):
    rs = [r for r in runs if r.get("gradient_checkpointing") == ckpt]
    med = lambda impl, k: statistics.median(r[k] for r in rs if r["impl"] == impl)
    speed = med("lorafleet", "steps_per_s") / med("diffusers", "steps_per_s")
    mem = med("lorafleet", "peak_mem_mib") / med("diffusers", "peak_mem_mib")
    print(f"verdict step 1 ({'with' if ckpt else 'without'} gradient checkpointing): it/s "
          f"lorafleet/peer {speed:.3f} (target >= 1.1: {'met' if speed >= 1.1 else 'NOT met'}); "
          f"peak memory lorafleet/peer {mem:.3f} (target <= 1: {'met' if mem <= 1 else 'NOT met'})")
if not smoke:
    s2 = json.loads(open(os.path.join(out, "step2.jsonl")).read())
    s3 = json.loads(open(os.path.join(out, "step3.jsonl")).read())
    ratio = s3["steps_per_s"] / s2["steps_per_s"]
    print(f"verdict step 2: SDXL 1024x1024 batch 1 fits in 24 GiB: {s2['steps_per_s']:.3f} it/s, "
          f"peak {s2['peak_mem_mib']:.0f} MiB")
    print(f"verdict step 3: within an 8 GiB budget: {s3['steps_per_s']:.3f} it/s, peak "
          f"{s3['peak_mem_mib']:.0f} MiB, {s3['streamed_blocks']} blocks streamed; ratio to step 2 "
          f"{ratio:.3f} (target >= 0.5: {'met' if ratio >= 0.5 else 'NOT met'})")
EOF
say "done; results in $OUT_DIR"
