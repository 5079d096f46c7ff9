#!/usr/bin/env bash
# The test command (README; .ci/run calls exactly this): installs what is missing, builds,
# prepares the demo data the integration tests train on, and runs every ctest test.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/install_deps.sh"
bash "$ROOT/scripts/build.sh"
bash "$ROOT/scripts/prepare_demo_data.sh"
cd "${BUILD_DIR:-$ROOT/build}"
ctest --output-on-failure --timeout 600 "$@"
