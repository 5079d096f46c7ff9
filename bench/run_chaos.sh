#!/usr/bin/env bash
# The long chaos run of issue 14 (bench/README.md, "Chaos run"): builds lorafleet-bench-chaos and
# the programs it starts, prepares the demo data, and runs one seeded chaos job: the tiny job on
# 3 env-mode ranks under lorafleet-launch, first uninterrupted, then meeting FAULTS faults
# (SIGKILL of a worker, SIGTERM of the group, SIGKILL + restart of the coordinator, a torn
# checkpoint) drawn from SEED; its final LoRA must equal the uninterrupted run's byte for byte.
# The short version runs in CI as integration_test_chaos.
#
# usage: bench/run_chaos.sh [SEED [FAULTS [STEPS]]]   defaults: 1 20 300
# Environment: BUILD_DIR (default build), CHAOS_SAVE_EVERY (default 5), CHAOS_WORK_DIR (default
# /tmp/lf_bench_chaos_<seed>, kept for inspection), CHAOS_TIME_LIMIT (seconds, default 1800),
# CHAOS_LATE=1 (the last fault may come after the job's last step: a known open race).
# Prints the plan, one line per fault as it is injected, and the summary; the whole output is
# also written to $CHAOS_WORK_DIR.log. Exit 0 when the run passed, 1 when it failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
case "${1:-}" in -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
seed="${1:-1}"
faults="${2:-20}"
steps="${3:-300}"
work="${CHAOS_WORK_DIR:-/tmp/lf_bench_chaos_$seed}"
say() { echo "[bench] $*" >&2; }

export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
BUILD_DIR="$BUILD_DIR" bash "$ROOT/scripts/build.sh" lorafleet-bench-chaos >&2
bash "$ROOT/scripts/prepare_demo_data.sh" >&2
say "seed $seed, $faults faults, $steps steps; log in $work.log"
start=$(date +%s)
set +e
"$BUILD_DIR/bench/lorafleet-bench-chaos" --seed "$seed" --faults "$faults" --steps "$steps" \
  --save-every "${CHAOS_SAVE_EVERY:-5}" --work-dir "$work" \
  --time-limit "${CHAOS_TIME_LIMIT:-1800}" ${CHAOS_LATE:+--late} 2>&1 | tee "$work.log"
rc=${PIPESTATUS[0]}
set -e
say "exit $rc after $(( $(date +%s) - start )) s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
exit "$rc"
