#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz (or the ones named) for SECONDS each, with ASan and
# UBSan, in build-fuzz/ (clang, -DLF_FUZZ=ON; lora_file links the torch wheel, uninstrumented).
# Each target starts from its committed seed corpus (tests/fuzz/corpus/<t>), regression inputs
# (tests/fuzz/regressions/<t>) and dictionary (tests/fuzz/dict/<t>.dict, if any); what it finds
# new is kept in build-fuzz/corpus/<t> for the next run, never written into the repository.
# A crash, leak, timeout or sanitizer report stops with exit 1 and names the input, saved as
# build-fuzz/artifacts/<t>/crash-*: copy it into tests/fuzz/regressions/<t>/ with the fix.
# Usage: bench/fuzz.sh [--smoke] [SECONDS] [TARGET...]   (--smoke: 10 s each, as CI runs it)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_EACH=60
if [ "${1:-}" = "--smoke" ]; then SECONDS_EACH=10; shift; fi
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then SECONDS_EACH="$1"; shift; fi

if ! command -v clang++ > /dev/null; then
  echo "fuzz.sh: clang++ not found; scripts/install_deps.sh installs clang and libclang-rt-14-dev" >&2
  exit 1
fi
mkdir -p "$BUILD"
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLF_FUZZ=ON > "$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log" >&2; exit 1; }
fi
cmake --build "$BUILD" -j "$(nproc)" > "$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log" >&2; exit 1; }

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  for f in "$ROOT"/tests/fuzz/*_fuzzer.cpp; do
    n="$(basename "$f" .cpp)"
    targets+=("${n%_fuzzer}")
  done
fi

# One thread per target (LibTorch's OpenMP pool in lora_file would take every core).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# Detect leaks too; report UBSan with a stack.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
printf '%-22s %8s %12s %10s  %s\n' target seconds runs corpus result
status=0
for t in "${targets[@]}"; do
  work="$BUILD/corpus/$t"
  art="$BUILD/artifacts/$t"
  mkdir -p "$work" "$art"
  inputs=("$ROOT/tests/fuzz/corpus/$t")
  [ -d "$ROOT/tests/fuzz/regressions/$t" ] && inputs+=("$ROOT/tests/fuzz/regressions/$t")
  dict=()
  [ -f "$ROOT/tests/fuzz/dict/$t.dict" ] && dict=(-dict="$ROOT/tests/fuzz/dict/$t.dict")
  log="$BUILD/$t.log"
  set +e
  "$BUILD/tests/fuzz/${t}_fuzzer" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "$work" \
    "${inputs[@]}" > "$log" 2>&1
  rc=$?
  set -e
  runs="$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
  units="$(find "$work" -type f | wc -l)"
  if [ "$rc" -eq 0 ]; then
    result=clean
  else
    result="FAILED (exit $rc): $(ls -t "$art" 2> /dev/null | head -1); see $log"
    status=1
  fi
  printf '%-22s %8s %12s %10s  %s\n' "$t" "$SECONDS_EACH" "${runs:-?}" "$units" "$result"
done
exit "$status"
