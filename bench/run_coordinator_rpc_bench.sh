#!/usr/bin/env bash
# Coordinator RPCs per training step (bench/README.md, issue 5): runs a short 2-rank job of the
# tiny model on CPU (coordinator + `mpirun -np 2` workers on a copy of the demo photos), reads
# lorafleet_coordinator_rpcs_total{method} from the coordinator's final metrics snapshot
# (<output_dir>/metrics/coordinator.prom) and prints the RPCs by method, RPCs per step excluding
# registration / dataset / plan / checkpoint / finish ones (the asynchronous progress reports
# and heartbeats), and the blocking RPCs per steady-state step (the critical path: 0, since a
# step never waits on the coordinator).
#
# usage: bench/run_coordinator_rpc_bench.sh [--steps N] [--save-every K]
# Environment: BUILD_DIR (default build; a configured full tree with lorafleet-coordinator,
# lorafleet-worker and lorafleet-make-checkpoint built).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
steps=40
save_every=10
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --save-every) save_every="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
say() { echo "[bench] $*" >&2; }
DEMO="$ROOT/.deps/demo"
VOCAB="$ROOT/.deps/bpe_simple_vocab_16e6.txt.gz"
for b in coordinator/lorafleet-coordinator worker/lorafleet-worker worker/lorafleet-make-checkpoint; do
  [ -x "$BUILD_DIR/$b" ] || { say "missing $BUILD_DIR/$b: build the tree first"; exit 1; }
done
[ -f "$DEMO/train/10_photo/astronaut.png" ] || { say "no demo data: run scripts/prepare_demo_data.sh"; exit 1; }

work="$(mktemp -d /tmp/lf_rpc_bench_XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/train/2_photo" "$work/reg/1_grey"
for s in astronaut chelsea coffee; do
  cp "$DEMO/train/10_photo/$s.png" "$DEMO/train/10_photo/$s.txt" "$work/train/2_photo/"
done
cp "$DEMO/reg/1_photo/camera.png" "$DEMO/reg/1_photo/coins.png" "$work/reg/1_grey/"
"$BUILD_DIR/worker/lorafleet-make-checkpoint" --architecture tiny --seed 7 \
  --output "$work/base.safetensors" >/dev/null
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
cat > "$work/job.yaml" <<YAML
model:
  pretrained_model_name_or_path: $work/base.safetensors
  architecture: tiny
  tokenizer_vocab: $VOCAB
dataset:
  train_data_dir: $work/train
  reg_data_dir: $work/reg
  resolution: 128
  min_bucket_reso: 64
  max_bucket_reso: 256
  caption_extension: .txt
training:
  seed: 5
  max_train_steps: $steps
  save_every_n_steps: $save_every
output:
  output_dir: $work/out
coordinator:
  listen_address: 127.0.0.1:$port
  metrics_address: ""
worker:
  metrics_port_base: 0
  device: cpu
YAML
mpi=(mpirun -np 2 --oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
"$BUILD_DIR/coordinator/lorafleet-coordinator" --config "$work/job.yaml" >"$work/coordinator.log" 2>&1 &
coord=$!
sleep 0.5
start=$(date +%s.%N)
"${mpi[@]}" "$BUILD_DIR/worker/lorafleet-worker" --coordinator "127.0.0.1:$port" \
  --no-progress-bar >"$work/workers.log" 2>&1 || { cat "$work/workers.log"; exit 1; }
end=$(date +%s.%N)
wait "$coord" || { cat "$work/coordinator.log"; exit 1; }
prom="$work/out/metrics/coordinator.prom"
python3 - "$prom" "$start" "$end" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
seconds = float(sys.argv[3]) - float(sys.argv[2])
rpcs = {m: float(v) for m, v in re.findall(
    r'^lorafleet_coordinator_rpcs_total\{method="(\w+)"\} (\S+)$', text, re.M)}
steps = float(re.search(r'^lorafleet_global_step (\S+)$', text, re.M).group(1))
setup = ("Register", "GetDataset", "GetEpochPlan", "CommitCheckpoint", "Finish")
print(f"2 ranks, {steps:.0f} steps in {seconds:.1f} s (workers' wall time)")
for m in ("Register", "GetDataset", "GetEpochPlan", "ReportProgress", "CommitCheckpoint", "Finish"):
    print(f"  {m:17s} {rpcs.get(m, 0):6.0f}")
total = sum(rpcs.values())
excluded = sum(v for m, v in rpcs.items() if m not in setup)
blocking = sum(v for m, v in rpcs.items() if m not in setup and m != "ReportProgress")
print(f"  {'total':17s} {total:6.0f}")
print(f"RPCs per step, all:                                         {total / steps:.2f}")
print(f"RPCs per step, excluding registration/plan/commit/finish:   {excluded / steps:.2f} "
      "(ReportProgress, asynchronous: background sender + 5 s heartbeat)")
print(f"blocking RPCs per steady-state step (critical path):        {blocking / steps:.2f}")
PY
