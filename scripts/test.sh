#!/usr/bin/env bash
# The test command (README; .ci/run calls exactly this): installs what is missing, builds,
# prepares the demo data the integration tests train on and runs every ctest test. Without
# arguments it then runs the checks CI needs as well:
#   - bench/fuzz.sh --smoke: every libFuzzer target for 10 s, with ASan and UBSan (build-fuzz/);
#   - scripts/sanitize.sh asan: the LibTorch-free libraries' tests under ASan + UBSan
#     (build-asan/);
#   - scripts/check_format.sh: the C++ lines changed since HEAD~1 are clang-formatted.
# With arguments (e.g. -R coordinator, -L unit) it runs only ctest with them.
# LF_WERROR=ON (set by .ci/run) builds lorafleet's own targets with -Werror.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/install_deps.sh"
bash "$ROOT/scripts/build.sh"
bash "$ROOT/scripts/prepare_demo_data.sh"
(cd "${BUILD_DIR:-$ROOT/build}" && ctest --output-on-failure --timeout 600 "$@")
if [ "$#" -gt 0 ]; then exit 0; fi
bash "$ROOT/bench/fuzz.sh" --smoke
bash "$ROOT/scripts/sanitize.sh" asan
bash "$ROOT/scripts/check_format.sh"
