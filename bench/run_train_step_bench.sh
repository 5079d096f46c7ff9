#!/usr/bin/env bash
# One command for the LoRA training-step benchmark: makes sure a Python with diffusers + peft is
# at hand, builds lorafleet-bench-train-step, runs it and the diffusers peer on the same settings
# back to back, and prints a table of lorafleet/peer ratios (figures go to bench/README.md).
#
# usage: bench/run_train_step_bench.sh [--repeats N] [bench flags...]
#   bench flags (passed to both): --preset tiny|sd15 --batch B --latent HxW --network-dim R
#     --network-alpha A --device cpu|cuda[:N] --dtype fp32|bf16 --warmup N --steps N --threads T
#     --seed S --lr LR --autocast (bf16 autocast around noise, UNet forward and loss)
#     --gradient-checkpointing (both sides) --memory-cap-gb G (CUDA allocator cap, both sides)
#   --repeats N  runs the pair N times, alternating, and tabulates the median of the medians.
# Environment: BUILD_DIR (default build-bench, configured -DLF_CORE_ONLY=ON), PEER_PYTHON (a
# Python that already imports torch, diffusers and peft: skips the venv), BENCH_VENV (default
# .deps/bench-venv), BENCH_NO_INSTALL=1 (never pip install: the default with --device cuda, for
# the GPU box that has no registry and gets the wheels carried in on PYTHONPATH), BENCH_OUT
# (also append the JSON lines to this file).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
BENCH_VENV="${BENCH_VENV:-$ROOT/.deps/bench-venv}"
# The versions the figures in bench/README.md were taken with.
PEER_PACKAGES="${PEER_PACKAGES:-diffusers==0.42.1 peft==0.21.2 transformers==5.24.0}"

repeats=1
args=()
threads=1
device=cpu
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) repeats="$2"; shift 2 ;;
    --threads) threads="$2"; args+=("$1" "$2"); shift 2 ;;
    --device) device="$2"; args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done

say() { echo "[bench] $*" >&2; }

# ---- (a) a Python that imports torch, diffusers and peft -------------------------------------
base_python="${PYTHON:-}"
if [ -z "$base_python" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then base_python="$ROOT/.venv/bin/python"; else base_python=python3; fi
fi
imports_peers() { "$1" -c 'import torch, diffusers, peft' >/dev/null 2>&1; }

if [ -n "${PEER_PYTHON:-}" ]; then
  imports_peers "$PEER_PYTHON" || {
    say "PEER_PYTHON=$PEER_PYTHON cannot import torch, diffusers and peft"; exit 1; }
  py="$PEER_PYTHON"
elif imports_peers "$base_python"; then
  py="$base_python"  # e.g. wheels carried in and put on PYTHONPATH
elif [ -x "$BENCH_VENV/bin/python" ] && imports_peers "$BENCH_VENV/bin/python"; then
  py="$BENCH_VENV/bin/python"
elif [ "${BENCH_NO_INSTALL:-$([[ $device == cuda* ]] && echo 1 || echo 0)}" = 1 ]; then
  say "no Python here imports diffusers and peft (tried $base_python with PYTHONPATH=${PYTHONPATH:-})"
  say "put the diffusers, peft, transformers (and their deps') wheel contents on PYTHONPATH"
  exit 1
else
  # A venv layered on the torch venv through a .pth file, so torch is shared, not reinstalled.
  say "creating $BENCH_VENV with $PEER_PACKAGES"
  torch_site="$("$base_python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')" || {
    say "$base_python cannot import torch (scripts/install_deps.sh makes .venv)"; exit 1; }
  [ -x "$BENCH_VENV/bin/python" ] || "$base_python" -m venv "$BENCH_VENV"
  venv_site="$("$BENCH_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$torch_site" > "$venv_site/lorafleet-torch.pth"
  # shellcheck disable=SC2086
  "$BENCH_VENV/bin/python" -m pip install --quiet $PEER_PACKAGES || {
    say "pip install failed; without network, put the wheels' contents on PYTHONPATH instead"
    exit 1; }
  imports_peers "$BENCH_VENV/bin/python" || { say "$BENCH_VENV still cannot import peers"; exit 1; }
  py="$BENCH_VENV/bin/python"
fi

# ---- (b) the C++ benchmark ---------------------------------------------------------------------
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
if ! grep -qs lorafleet-bench-train-step "$BUILD_DIR/build.ninja" "$BUILD_DIR/Makefile"; then
  gen=()
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    command -v ninja >/dev/null && gen=(-G Ninja)
    gen+=(-DCMAKE_BUILD_TYPE=Release -DLF_CORE_ONLY=ON -DLF_BUILD_TESTS=OFF)
  fi
  say "configuring $BUILD_DIR"
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" >&2
fi
say "building lorafleet-bench-train-step in $BUILD_DIR"
cmake --build "$BUILD_DIR" -j "$(nproc)" --target lorafleet-bench-train-step >&2
bench_bin="$BUILD_DIR/bench/lorafleet-bench-train-step"

# ---- (c) both measurements, back to back -------------------------------------------------------
cores="$(nproc --all)"  # before OMP_NUM_THREADS, which nproc honours
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
lines="$(mktemp)"
trap 'rm -f "$lines"' EXIT
say "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
command -v nvidia-smi >/dev/null && say "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
say "load before: $(uptime | sed 's/.*load average/load average/')"
for ((i = 0; i < repeats; i++)); do
  say "run $((i + 1))/$repeats: lorafleet ${args[*]:-}"
  "$bench_bin" "${args[@]}" | tee -a "$lines"
  say "run $((i + 1))/$repeats: diffusers peer ${args[*]:-}"
  "$py" "$ROOT/bench/peer_diffusers_train_step.py" "${args[@]}" 2> >(grep -v "kept in float32" >&2) \
    | tee -a "$lines"
done
say "load after: $(uptime | sed 's/.*load average/load average/')"
[ -n "${BENCH_OUT:-}" ] && cat "$lines" >> "$BENCH_OUT"

"$py" - "$lines" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
lf = [r for r in runs if r["impl"] == "lorafleet"]
pe = [r for r in runs if r["impl"] == "diffusers"]
med = lambda rs, k: statistics.median(r[k] for r in rs)
a, b = lf[0], pe[0]
if (a["unet_params"], a["lora_params"], a["lora_modules"]) != \
   (b["unet_params"], b["lora_params"], b["lora_modules"]):
    print(f"WARNING: models differ: lorafleet unet/lora/modules {a['unet_params']}/"
          f"{a['lora_params']}/{a['lora_modules']} vs peer {b['unet_params']}/"
          f"{b['lora_params']}/{b['lora_modules']}")
for k in ("dtype", "autocast", "gradient_checkpointing"):
    if a.get(k) != b.get(k):
        print(f"WARNING: {k} differs: lorafleet {a.get(k)} vs peer {b.get(k)}")
amp = " autocast bf16" if a.get("autocast") else " no autocast"
amp += ", gradient checkpointing" if a.get("gradient_checkpointing") else ""
print(f"\n{a['preset']} {a['device']} dtype {a['dtype']}{amp} batch {a['batch']} "
      f"latent {a['latent']} "
      f"ctx 77 R {a['network_dim']} threads {a['threads']} steps {a['steps']} "
      f"(warmup {a['warmup']}) x{len(lf)}; torch {b['torch']}, diffusers {b['diffusers']}, "
      f"peft {b['peft']}; UNet {a['unet_params']:,} params, LoRA {a['lora_params']:,} "
      f"in {a['lora_modules']} modules")
rows = [("median step s", "median_step_s", "{:.4f}"), ("it/s", "steps_per_s", "{:.3f}"),
        ("samples/s", "samples_per_s", "{:.2f}"),
        (f"peak mem MiB ({a['peak_mem_kind']})", "peak_mem_mib", "{:.0f}"),
        ("final loss (same scale expected)", "final_loss", "{:.4f}")]
if a["peak_mem_kind"] == "ru_maxrss":
    for r in runs:
        r["rss_delta_mib"] = r["peak_mem_mib"] - r["rss_before_model_mib"]
    rows.insert(4, ("peak RSS - RSS before model MiB", "rss_delta_mib", "{:.0f}"))
for r in runs:  # what the step adds on top of the model and the LoRA: the activations
    r["activation_mib"] = r["peak_mem_mib"] - r["mem_after_setup_mib"]
rows.insert(4, ("step peak - after setup MiB", "activation_mib", "{:.0f}"))
print(f"{'metric':<36}{'lorafleet':>12}{'diffusers':>12}{'lf/peer':>10}")
for name, key, fmt in rows:
    x, y = med(lf, key), med(pe, key)
    print(f"{name:<36}{fmt.format(x):>12}{fmt.format(y):>12}{x / y:>10.3f}")
EOF
