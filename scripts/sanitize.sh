#!/usr/bin/env bash
# Builds the LibTorch-free part of lorafleet (lf_common, the protocol, the coordinator,
# lorafleet-ctl, the worker's gRPC client, the TensorBoard writer, lorafleet-launch) and the
# collectives' watchdog (TimedCommunicator) with a sanitizer and runs their tests: the common_*,
# coordinator_*, fuzz_replay_* and worker_test_{launcher,timed_communicator} ctest tests.
#   scripts/sanitize.sh asan [CTEST ARGS...]   ASan + UBSan, build-asan/ (CI runs this)
#   scripts/sanitize.sh tsan [CTEST ARGS...]   TSan, build-tsan/ (the coordinator's threads)
# Any report fails the test that produced it. The torch wheel is not instrumented, so the
# worker's training code (and the tests that link it) are not part of these builds; the
# watchdog's test links the wheel only to pass tensors through.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
preset="${1:-asan}"
shift || true
case "$preset" in
  asan)
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
    export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$ROOT/tests/support/lsan.supp}" ;;
  tsan)
    # ignore_noninstrumented_modules: Debian's gRPC 1.51 and abseil order their threads with
    # absl::Mutex (futex-based) and atomics, OpenSSL, upb, oneTBB and GDAL with their own locks,
    # none instrumented. Without it one run reports 2,358 races and lock-order inversions
    # (halt_on_error=0), not one with an access in lorafleet's own source: all are inside those
    # libraries, their inline headers or data they hand over (GDAL 3.6's inversion is OSGeo/gdal
    # issue 1108). It ignores only what those libraries do through intercepted calls (memcpy,
    # new, locks): lorafleet's code is instrumented and checked (a race injected into
    # TimedCommunicator is reported).
    export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1}" ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan [ctest args...]" >&2; exit 2 ;;
esac
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
cd "$ROOT"
if [ ! -f "build-$preset/build.ninja" ]; then cmake --preset "$preset" > /dev/null; fi
cmake --build "build-$preset" -j "$(nproc)"
(cd "build-$preset" && ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@")
