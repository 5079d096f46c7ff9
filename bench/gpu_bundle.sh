#!/usr/bin/env bash
# Packs what step 4 of bench/gpu_check.sh needs onto the accelerator machine, which has
# LibTorch, CUDA and Python but none of Debian's libraries the coordinator and worker link
# (gRPC, Protobuf, yaml-cpp, OpenCV, Open MPI, ...) and no network: the three programs as built
# here (CUDA/NCCL compiled in), every shared library they need that is not glibc's, LibTorch's or
# CUDA's (those come from the device's own torch wheel at run time), a few demo photographs and
# the CLIP vocabulary. Writes .gpu-bundle.tar.xz (git-ignored; ~55 MB, under the 64 MiB carry).
#
# usage: bench/gpu_bundle.sh        (after scripts/build.sh and scripts/prepare_demo_data.sh)
#   then: device run, command "bash bench/gpu_check.sh", carry [".whl", ".gpu-bundle.tar.xz"]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
stage="$ROOT/.gpu-bundle"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib" "$stage/data/train/4_photo"
bins=("$BUILD/coordinator/lorafleet-coordinator" "$BUILD/worker/lorafleet-worker"
      "$BUILD/worker/lorafleet-make-checkpoint")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "gpu_bundle.sh: $b missing: run scripts/build.sh" >&2; exit 1; }
  cp "$b" "$stage/bin/"
done
grep -q 'LF_HAVE_NCCL' "$BUILD/build.ninja" ||
  echo "gpu_bundle.sh: warning: this build has no NCCL (the GPU job will use Gloo)" >&2
# Every needed library but glibc's, the C++ runtime's, LibTorch's and CUDA's.
ldd "${bins[@]}" | awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/torch/lib/|/nvidia/|/usr/local/cuda|/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
demo="$ROOT/.deps/demo/train/10_photo"
for img in astronaut chelsea coffee rocket; do
  cp "$demo/$img".* "$stage/data/train/4_photo/"
done
cp "$ROOT/.deps/bpe_simple_vocab_16e6.txt.gz" "$stage/data/"
tar -C "$ROOT" -cJf "$ROOT/.gpu-bundle.tar.xz" .gpu-bundle
rm -rf "$stage"
echo "gpu_bundle.sh: $(du -h "$ROOT/.gpu-bundle.tar.xz" | cut -f1) in .gpu-bundle.tar.xz" \
     "($(ls "${bins[@]}" | wc -l) programs, libraries listed by ldd)"
