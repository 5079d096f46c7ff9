#!/usr/bin/env bash
# The demo job (README): installs what is missing, builds the programs it runs, prepares the
# demo dataset and the tiny base checkpoint, then runs a coordinator and `mpirun -np 2` workers
# on this machine and prints where the LoRA, the checkpoints and the metrics are. Idempotent: a
# second run reuses the install and the build, and moves the previous run's outputs aside
# instead of overwriting. Ctrl-C stops the job as `lorafleet-ctl stop` does (the ranks commit a
# checkpoint, write the LoRA and exit 0); a second Ctrl-C cancels it (exit 4, the last committed
# checkpoint stands).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONFIG="${1:-configs/demo.yaml}"
NP="${NP:-2}"
cd "$ROOT"
bash scripts/install_deps.sh
# Only the programs the demo runs (about half of the build's steps); scripts/test.sh builds the
# tests.
bash scripts/build.sh lorafleet-coordinator lorafleet-worker lorafleet-make-checkpoint lorafleet-ctl
bash scripts/prepare_demo_data.sh
BIN="${BUILD_DIR:-$ROOT/build}"

BASE=.deps/models/tiny-sd-seed1234.safetensors
[ -f "$BASE" ] || "$BIN/worker/lorafleet-make-checkpoint" --preset tiny --seed 1234 --output "$BASE"

OUT=runs/demo
if [ -e "$OUT" ]; then
  prev="$OUT.prev-$(date +%Y%m%d-%H%M%S)"
  echo "[demo] moving the previous run's $OUT to $prev"
  mv "$OUT" "$prev"
fi
mkdir -p "$OUT"

start=$(date +%s)
"$BIN/coordinator/lorafleet-coordinator" --config "$CONFIG" --linger-seconds 2 \
  >"$OUT/coordinator.log" 2>&1 &
COORD=$!
trap 'kill $COORD 2>/dev/null || true' EXIT

MPI_FLAGS=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && MPI_FLAGS+=(--allow-run-as-root)
# Under mpirun the workers' stdout is a pseudo-terminal even when ours is a pipe, so say here
# whether a redrawn progress bar makes sense.
WORKER_FLAGS=()
[ -t 1 ] || WORKER_FLAGS+=(--no-progress-bar)
# mpirun runs in its own session: a Ctrl-C in this terminal then reaches only the coordinator,
# which asks the ranks to stop through their heartbeats (mpirun itself would kill them).
echo "[demo] while it runs: the status page http://127.0.0.1:9400/ and" \
  "$BIN/coordinator/lorafleet-ctl --coordinator 127.0.0.1:50051 status" \
  "(or stop, cancel, sample-now); Ctrl-C stops it with a checkpoint"
INTERRUPTS=0
on_interrupt() {
  INTERRUPTS=$((INTERRUPTS + 1))
  # The coordinator turns the second Ctrl-C into a cancel (the ranks exit 4); a third one ends
  # mpirun here too.
  if [ "$INTERRUPTS" -ge 3 ]; then
    echo "[demo] third Ctrl-C: ending mpirun now" >&2
    kill -TERM "$MPIRUN" 2>/dev/null || true
  fi
}
trap on_interrupt INT
trap 'kill $COORD 2>/dev/null || true; kill -TERM $MPIRUN 2>/dev/null || true' EXIT
set +e
setsid mpirun -np "$NP" "${MPI_FLAGS[@]}" \
  "$BIN/worker/lorafleet-worker" --coordinator 127.0.0.1:50051 "${WORKER_FLAGS[@]}" \
  > >(tee "$OUT/workers.log") 2>&1 &
MPIRUN=$!
# `wait` returns early when a trapped signal arrives: wait again until mpirun is gone.
while true; do
  wait "$MPIRUN"; rc=$?
  kill -0 "$MPIRUN" 2>/dev/null || break
done
while true; do
  wait "$COORD"; crc=$?
  kill -0 "$COORD" 2>/dev/null || break
done
set -e
trap - EXIT INT
end=$(date +%s)
if [ "$rc" -ne 0 ] || [ "$crc" -ne 0 ]; then
  echo "[demo] FAILED (workers exit $rc, coordinator exit $crc); logs in $OUT/" >&2
  tail -n 20 "$OUT/coordinator.log" >&2
  exit 1
fi
echo
LORA="$(sed -n 's/^lorafleet: LoRA *//p' "$OUT/workers.log" | tail -n 1)"
if grep -q "job done: stopped at global_step" "$OUT/coordinator.log"; then
  echo "[demo] stopped on request after $((end - start)) s; the job is not finished"
else
  echo "[demo] done in $((end - start)) s (training job; install/build/data prep not counted)"
fi
echo "[demo] LoRA:        ${LORA:-$ROOT/$OUT/demo_lora.safetensors}"
echo "[demo] checkpoints: $ROOT/$OUT/checkpoints/ (to resume: start the coordinator again, then mpirun ... lorafleet-worker --resume auto)"
echo "[demo] metrics:     live at http://127.0.0.1:9400/metrics (coordinator) and"
echo "                    http://127.0.0.1:9410/metrics, :9411 (workers) while a job runs;"
echo "                    final snapshots in $ROOT/$OUT/metrics/"
echo "[demo] samples:     $ROOT/$OUT/sample/ (PNGs of configs/demo_prompts.txt at steps 0, 60, 120)"
echo "[demo] TensorBoard: $ROOT/.venv/bin/tensorboard --logdir $ROOT/$OUT/logs  (loss, lr, samples)"
echo "[demo] logs:        $ROOT/$OUT/coordinator.log, $ROOT/$OUT/workers.log"
