#!/usr/bin/env bash
# Gradient checkpointing's trade-off, measured: lorafleet's training step with
# --gradient-checkpointing against the same step without it (the peer), alternating, in one
# command. Prints the step-time ratio and the activation-memory ratio, where the activation
# memory of a run is its peak minus what it holds once the model and the LoRA are set up (CPU:
# ru_maxrss; CUDA: the caching allocator's max allocated). Figures go to bench/README.md.
#
# usage: bench/run_checkpointing_bench.sh [--repeats N] [lorafleet-bench-train-step flags...]
#   e.g. --preset sd15 --batch 2 --latent 64x64 --warmup 1 --steps 2
# Environment: BUILD_DIR (default build-bench, -DLF_CORE_ONLY=ON), PYTHON (for the table;
# default .venv/bin/python, else python3), BENCH_OUT (append the JSON lines to this file).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
repeats=1
args=()
threads=1
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) repeats="$2"; shift 2 ;;
    --threads) threads="$2"; args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
say() { echo "[bench] $*" >&2; }
py="${PYTHON:-$([ -x "$ROOT/.venv/bin/python" ] && echo "$ROOT/.venv/bin/python" || echo python3)}"

export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLF_CORE_ONLY=ON \
    -DLF_BUILD_TESTS=OFF >&2
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target lorafleet-bench-train-step >&2
bench_bin="$BUILD_DIR/bench/lorafleet-bench-train-step"

export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
lines="$(mktemp)"
trap 'rm -f "$lines"' EXIT
say "load before: $(uptime | sed 's/.*load average/load average/')"
for ((i = 0; i < repeats; i++)); do
  say "run $((i + 1))/$repeats: without gradient checkpointing ${args[*]:-}"
  "$bench_bin" "${args[@]}" | tee -a "$lines"
  say "run $((i + 1))/$repeats: with gradient checkpointing"
  "$bench_bin" "${args[@]}" --gradient-checkpointing | tee -a "$lines"
done
say "load after: $(uptime | sed 's/.*load average/load average/')"
[ -n "${BENCH_OUT:-}" ] && cat "$lines" >> "$BENCH_OUT"

"$py" - "$lines" <<'PYEOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for r in runs:
    r["activation_mib"] = r["peak_mem_mib"] - r["mem_after_setup_mib"]
on = [r for r in runs if r["gradient_checkpointing"]]
off = [r for r in runs if not r["gradient_checkpointing"]]
med = lambda rs, k: statistics.median(r[k] for r in rs)
a = on[0]
print(f"\n{a['preset']} {a['device']} dtype {a['dtype']} batch {a['batch']} latent {a['latent']} "
      f"R {a['network_dim']} threads {a['threads']} steps {a['steps']} (warmup {a['warmup']}) "
      f"x{len(on)}; memory kind {a['peak_mem_kind']}")
print(f"{'metric':<34}{'checkpointing':>14}{'without':>12}{'ratio':>8}")
for name, key, fmt in [("median step s", "median_step_s", "{:.3f}"),
                       ("activation MiB (peak - setup)", "activation_mib", "{:.0f}"),
                       ("peak MiB", "peak_mem_mib", "{:.0f}"),
                       ("final loss (identical expected)", "final_loss", "{:.6f}")]:
    x, y = med(on, key), med(off, key)
    print(f"{name:<34}{fmt.format(x):>14}{fmt.format(y):>12}{x / y:>8.3f}")
PYEOF
