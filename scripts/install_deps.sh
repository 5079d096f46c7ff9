#!/usr/bin/env bash
# Installs everything lorafleet needs to build, test and run the demo, and nothing twice.
# Shared by scripts/demo.sh and scripts/test.sh (and so by .ci/run). Idempotent: every step
# checks first and skips what is already there.
#
#   Debian packages  gRPC/Protobuf, yaml-cpp, Open MPI, OpenCV, libexif, libjpeg, libpng, toml++,
#                    nlohmann-json, GoogleTest, cpp-httplib, CLI11, Boost (CRC32C), ccache,
#                    promtool (prometheus), curl, chromium + DejaVu fonts (the status page's
#                    browser test), clang + libclang-rt-14-dev (libFuzzer: bench/fuzz.sh)
#   PyPI (in .venv)  torch==${LORAFLEET_TORCH_VERSION} (LibTorch for CMake), numpy; Pillow and
#                    opencv-python-headless for the kohya peer of bench/run_scan_prepare_bench.sh;
#                    kubernetes-validate (bundled Kubernetes JSON schemas, works offline) for
#                    scripts/validate_k8s.py (ctest deploy_validate_k8s); tensorboard, whose
#                    event reader checks the TensorBoard logs (integration_test_tensorboard)
#   .deps/           the CLIP BPE vocabulary from the open_clip_torch wheel, and the
#                    skimage sample photographs from Debian's python3-skimage package
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
VENV="$ROOT/.venv"
TORCH_VERSION="${LORAFLEET_TORCH_VERSION:-2.11.0}"
OPEN_CLIP_VERSION="3.3.0"
PILLOW_VERSION="12.1.1"
OPENCV_PY_VERSION="4.13.0.92"
KUBERNETES_VALIDATE_VERSION="1.37.0"
TENSORBOARD_VERSION="2.21.0"
SKIMAGE_DEB="python3-skimage"
mkdir -p "$DEPS"

log() { echo "[install] $*"; }

# --- Debian packages ---------------------------------------------------------------------
APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config curl unzip
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev libexif-dev libjpeg-dev
  libcpp-httplib-dev libcli11-dev libssl-dev zlib1g-dev libpcre2-dev
  libtomlplusplus-dev libicu-dev
  libgloo-dev libsqlite3-dev iproute2 openssl libboost-dev libpng-dev
  prometheus
  chromium fonts-dejavu-core
  clang libclang-rt-14-dev
)
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # prometheus brings promtool; do not let its service start inside containers.
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "Debian packages present"
fi

# --- LibTorch from the PyPI torch wheel ----------------------------------------------------
# A venv whose creation was interrupted has a python but no pip: start it over.
if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  log "removing the incomplete $VENV"
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  # Debian's own python3 needs python3-venv for this (a pyenv/python.org python has it built in).
  python3 -m venv "$VENV" 2>/dev/null || {
    rm -rf "$VENV"
    $SUDO apt-get install -y -qq --no-install-recommends python3-venv python3-pip >/dev/null
    python3 -m venv "$VENV"
  }
fi
if ! "$VENV/bin/python" -c "import torch,sys; sys.exit(0 if torch.__version__.split('+')[0]=='$TORCH_VERSION' else 1)" 2>/dev/null; then
  log "pip install torch==$TORCH_VERSION (large download, once)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" numpy
else
  log "torch $TORCH_VERSION present"
fi
"$VENV/bin/python" -c "import torch; print('[install] torch', torch.__version__, 'cuda', torch.version.cuda)"

# --- The kohya-style peer of bench/run_scan_prepare_bench.sh: Pillow + opencv-python ----------
# (opencv-python-headless 4.13 is the first to accept numpy >= 2.3, which torch's numpy is.)
PEER_IMAGE_PACKAGES=("pillow==$PILLOW_VERSION" "opencv-python-headless==$OPENCV_PY_VERSION")
if ! "$VENV/bin/python" -c "import sys, PIL, cv2; sys.exit(0 if (PIL.__version__, cv2.__version__) == ('$PILLOW_VERSION', '${OPENCV_PY_VERSION%.*}') else 1)" 2>/dev/null; then
  log "pip install ${PEER_IMAGE_PACKAGES[*]}"
  "$VENV/bin/python" -m pip install -q "${PEER_IMAGE_PACKAGES[@]}"
else
  log "Pillow $PILLOW_VERSION and opencv-python $OPENCV_PY_VERSION present"
fi

# --- kubernetes-validate: offline schema checks of deploy/k8s (scripts/validate_k8s.py) ------
# The wheel bundles the OpenAPI-derived JSON schemas of Kubernetes 1.25-1.37, so validation
# needs no network; validate_k8s.py pins the Kubernetes version it checks against.
if ! "$VENV/bin/python" -c "import sys, importlib.metadata as m; sys.exit(0 if m.version('kubernetes-validate') == '$KUBERNETES_VALIDATE_VERSION' else 1)" 2>/dev/null; then
  log "pip install kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  "$VENV/bin/python" -m pip install -q "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
else
  log "kubernetes-validate $KUBERNETES_VALIDATE_VERSION present"
fi

# --- tensorboard: its event reader checks lorafleet's event files (integration_test_tensorboard)
if ! "$VENV/bin/python" -c "import sys, tensorboard; sys.exit(0 if tensorboard.__version__ == '$TENSORBOARD_VERSION' else 1)" 2>/dev/null; then
  log "pip install tensorboard==$TENSORBOARD_VERSION"
  "$VENV/bin/python" -m pip install -q "tensorboard==$TENSORBOARD_VERSION"
else
  log "tensorboard $TENSORBOARD_VERSION present"
fi

# --- CLIP BPE vocabulary (shipped by open_clip_torch; never hand-written) -----------------
VOCAB="$DEPS/bpe_simple_vocab_16e6.txt.gz"
if [ ! -s "$VOCAB" ]; then
  log "fetching the CLIP BPE vocabulary from open_clip_torch==$OPEN_CLIP_VERSION"
  tmp="$(mktemp -d)"
  "$VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "open_clip_torch==$OPEN_CLIP_VERSION"
  unzip -q -o -j "$tmp"/open_clip_torch-*.whl 'open_clip/bpe_simple_vocab_16e6.txt.gz' -d "$tmp/x"
  mv "$tmp/x/bpe_simple_vocab_16e6.txt.gz" "$VOCAB.tmp" && mv "$VOCAB.tmp" "$VOCAB"
  rm -rf "$tmp"
fi

# --- Demo photographs (Debian's python3-skimage data folder) -------------------------------
SKDATA="$DEPS/skimage/usr/lib/python3/dist-packages/skimage/data"
if [ ! -f "$SKDATA/astronaut.png" ]; then
  log "extracting $SKIMAGE_DEB sample images"
  tmp="$(mktemp -d)"
  # apt-get download needs package lists; a fresh image may have none until an update.
  (cd "$tmp" && apt-get download -qq "$SKIMAGE_DEB") ||
    { $SUDO apt-get update -qq && (cd "$tmp" && apt-get download -qq "$SKIMAGE_DEB"); }
  rm -rf "$DEPS/skimage"
  dpkg -x "$tmp"/python3-skimage_*.deb "$DEPS/skimage"
  rm -rf "$tmp"
fi
log "done"
