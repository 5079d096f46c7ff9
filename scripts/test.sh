#!/usr/bin/env bash
# The test command (README; .ci/run calls exactly this): installs what is missing, builds,
# prepares the demo data the integration tests train on, runs every ctest test, then the fuzz
# smoke (bench/fuzz.sh --smoke: every libFuzzer target for 10 s, with ASan and UBSan).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/install_deps.sh"
bash "$ROOT/scripts/build.sh"
bash "$ROOT/scripts/prepare_demo_data.sh"
(cd "${BUILD_DIR:-$ROOT/build}" && ctest --output-on-failure --timeout 600 "$@")
bash "$ROOT/bench/fuzz.sh" --smoke
