#!/usr/bin/env bash
# One command for the checkpoint throughput benchmark (bench/README.md, "Checkpoint throughput
# (issue 5)"): builds lorafleet-bench-checkpoint, writes + reads an SD1.5-sized rank-32 LoRA
# checkpoint (LoRA + AdamW state + RNG file, COMMITTED marker) N times through the real
# checkpoint code, then measures dd writing the same number of MiB with conv=fsync and reading
# it back, in the same directory, and prints MB/s for both and the ratio lorafleet/dd.
#
# usage: bench/run_checkpoint_bench.sh [--dir DIR] [--repeats N] [--rank R] [--lora-mb MB]
# Environment: BUILD_DIR (default build; any configured full tree works).
# Reads are served from the page cache on both sides (the data was just written): dropping
# caches needs root and a quiet machine (echo 3 > /proc/sys/vm/drop_caches) and is not done, so
# read figures compare in-memory parse + copy against a plain read of cached pages.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
dir="$BUILD_DIR/checkpoint_bench"
repeats=5
rank=32
lora_mb=38
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --rank) rank="$2"; shift 2 ;;
    --lora-mb) lora_mb="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
say() { echo "[bench] $*" >&2; }

export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  gen=(-DCMAKE_BUILD_TYPE=Release)
  command -v ninja >/dev/null && gen+=(-G Ninja)
  say "configuring $BUILD_DIR"
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" >&2
fi
say "building lorafleet-bench-checkpoint in $BUILD_DIR"
cmake --build "$BUILD_DIR" -j "$(nproc)" --target lorafleet-bench-checkpoint >&2
mkdir -p "$dir"
say "filesystem of $dir: $(df -hT "$dir" | awk 'NR==2 {print $1, $2, $3 " total,", $5 " free"}')"

say "lorafleet: $repeats checkpoints (rank $rank, LoRA ${lora_mb} MB + AdamW state)"
json="$("$BUILD_DIR/bench/lorafleet-bench-checkpoint" --dir "$dir" --repeats "$repeats" \
         --rank "$rank" --lora-mb "$lora_mb")"
echo "$json"
field() { echo "$json" | sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p"; }
bytes="$(field bytes)"
mib=$(( (bytes + 1048575) / 1048576 ))

# dd's summary line: "<bytes> bytes (...) copied, <seconds> s, <rate>"; MB/s from bytes/seconds.
dd_rate() { awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") s = $(i - 1);
                            printf "%.1f", $1 / s / 1e6 }'; }
w_rates=(); r_rates=()
for i in $(seq "$repeats"); do
  rm -f "$dir/dd.bin"
  w_rates+=("$(dd if=/dev/zero of="$dir/dd.bin" bs=1M count="$mib" conv=fsync 2>&1 | dd_rate)")
  r_rates+=("$(dd if="$dir/dd.bin" of=/dev/null bs=1M 2>&1 | dd_rate)")
done
rm -f "$dir/dd.bin"
med() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
dd_w="$(med "${w_rates[@]}")"
dd_r="$(med "${r_rates[@]}")"
lf_w="$(field write_mb_s)"
lf_s="$(field save_mb_s)"
lf_r="$(field read_mb_s)"
say "dd write runs (MB/s): ${w_rates[*]}; dd read runs: ${r_rates[*]}"
printf '\n%-34s %12s %12s %10s\n' "checkpoint of $bytes bytes ($mib MiB)" "lorafleet" "dd" "lf/dd"
printf '%-34s %12s %12s %10.3f\n' "save MB/s (median of $repeats)" "$lf_s" "$dd_w" \
  "$(awk -v a="$lf_s" -v b="$dd_w" 'BEGIN { print a / b }')"
printf '%-34s %12s %12s %10.3f\n' "save + prune MB/s (median)" "$lf_w" "$dd_w" \
  "$(awk -v a="$lf_w" -v b="$dd_w" 'BEGIN { print a / b }')"
printf '%-34s %12s %12s %10.3f\n' "read MB/s (median of $repeats)" "$lf_r" "$dd_r" \
  "$(awk -v a="$lf_r" -v b="$dd_r" 'BEGIN { print a / b }')"
