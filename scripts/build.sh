#!/usr/bin/env bash
# Configures (once) and builds lorafleet into build/ with Ninja, ccache and precompiled headers.
# A warm rebuild with nothing changed takes seconds. BUILD_DIR and BUILD_TYPE may be overridden.
# Usage: build.sh [TARGET...]: every target (tests included), or only the named ones and what
# they link (scripts/demo.sh builds just the programs it runs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BUILD_TYPE="${BUILD_TYPE:-Release}"
# ccache must accept PCH-compiled objects (GCC's .gch): these sloppiness flags are the documented
# requirement.
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
fi
# LF_WERROR=ON|OFF (CI sets ON): warnings of lorafleet's own targets become errors.
if [ -n "${LF_WERROR:-}" ]; then cmake -S "$ROOT" -B "$BUILD_DIR" -DLF_WERROR="$LF_WERROR" > /dev/null; fi
if [ "$#" -gt 0 ]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "$@"
else
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
