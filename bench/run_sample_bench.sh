#!/usr/bin/env bash
# One command for the sample-image benchmark: builds lorafleet-bench-sample and
# lorafleet-make-checkpoint, writes the preset's seeded checkpoint (the C++ bench generates the
# same weights in memory), runs lorafleet and the diffusers peer with the same flags back to
# back, and prints the lorafleet / diffusers ratio of seconds per image (bench/README.md).
#
# usage: bench/run_sample_bench.sh [--preset tiny] [--sampler euler_a] [--steps 20]
#          [--width 512] [--height 512] [--images 5] [--warmup 1] [--threads 1] [--scale 7.5]
# Environment: BUILD_DIR (default build), PYTHON (default .venv/bin/python, which needs
# diffusers: pip install -r tests/oracle/requirements.txt).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
preset=tiny
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = "--preset" ] && preset="${args[$((i + 1))]}"
done
cmake --build "$BUILD_DIR" --target lorafleet-bench-sample lorafleet-make-checkpoint >/dev/null
ckpt="$ROOT/.deps/models/bench-$preset-seed1234.safetensors"
[ -f "$ckpt" ] || "$BUILD_DIR/worker/lorafleet-make-checkpoint" --preset "$preset" --seed 1234 \
  --output "$ckpt" >/dev/null
ours=$("$BUILD_DIR/bench/lorafleet-bench-sample" "$@")
peer=$(HF_HUB_OFFLINE=1 PYTHONWARNINGS=ignore "$PY" "$ROOT/bench/sample_peer_diffusers.py" \
  --checkpoint "$ckpt" "$@")
echo "$ours"
echo "$peer"
"$PY" - "$ours" "$peer" <<'PYEOF'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{a['preset']} {a['sampler']} {a['steps']} steps {a['width']}x{a['height']}, "
      f"{a['threads']} thread(s): lorafleet {a['seconds_per_image']:.3f} s/image, "
      f"{b['impl']} {b['seconds_per_image']:.3f} s/image, "
      f"ratio lorafleet/diffusers {a['seconds_per_image'] / b['seconds_per_image']:.2f}")
PYEOF
