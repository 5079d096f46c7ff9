#!/usr/bin/env bash
# Regenerates every fixture of the Python oracle under tests/fixtures/oracle/ (see README.md).
# Idempotent: builds lorafleet-make-checkpoint only when missing, installs the pinned oracle
# packages into .venv only when missing, and replaces a fixture only when its content changed.
# Usage: tests/oracle/regen.sh [BUILD_DIR]   (default: build; env PYTHON overrides .venv/bin/python)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-${ROOT}/build}"
[[ "${BUILD}" = /* ]] || BUILD="${ROOT}/${BUILD}"
PY="${PYTHON:-${ROOT}/.venv/bin/python}"
ORACLE="${ROOT}/tests/oracle"
OUT="${ROOT}/tests/fixtures/oracle"
TOOL="${BUILD}/worker/lorafleet-make-checkpoint"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore

if [[ ! -x "${TOOL}" ]]; then
  [[ -f "${BUILD}/CMakeCache.txt" ]] || cmake -S "${ROOT}" -B "${BUILD}" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release
  cmake --build "${BUILD}" --target lorafleet-make-checkpoint
fi
if ! "${PY}" - <<'PYEOF'
import importlib.metadata as m, sys
want = {"diffusers": "0.42.1", "transformers": "5.24.0", "open_clip_torch": "3.3.0",
        "torchvision": "0.26.0", "peft": "0.21.2", "lycoris-lora": "4.1.3"}
bad = []
for n, v in want.items():
    try:
        if m.version(n) != v: bad.append(n)
    except m.PackageNotFoundError:
        bad.append(n)
for n in ["accelerate", "ftfy", "pyyaml", "safetensors"]:
    try: m.version(n)
    except m.PackageNotFoundError: bad.append(n)
sys.exit(1 if bad else 0)
PYEOF
then
  "${PY}" -m pip install -r "${ORACLE}/requirements.txt"
fi

TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT
mkdir -p "${OUT}"

# install NEW DEST: keep DEST when it holds the same content (see same_fixture.py).
install_fixture() {
  if [[ -f "$2" ]] && "${PY}" "${ORACLE}/same_fixture.py" "$1" "$2"; then
    echo "unchanged: ${2#${ROOT}/}"
  else
    cp "$1" "$2" && chmod 644 "$2" && echo "updated:   ${2#${ROOT}/}"
  fi
}

# The tool's preset flag: --preset (new) or --architecture (before the SD2/SDXL presets).
if "${TOOL}" --help 2>&1 | grep -q -- "--preset"; then FLAG=--preset; else FLAG=--architecture; fi
SEED=1234

# 1. Tiny parity and long-caption fixtures, one each per preset the tool knows.
for preset in tiny tiny-sd2 tiny-sdxl; do
  if ! "${TOOL}" "${FLAG}" "${preset}" --seed "${SEED}" --output "${TMP}/${preset}.ckpt.safetensors" \
       --force >/dev/null 2>"${TMP}/err"; then
    echo "skipped:   ${preset} (lorafleet-make-checkpoint: $(head -c 200 "${TMP}/err"))"
    continue
  fi
  nice "${PY}" "${ORACLE}/make_parity_fixture.py" --preset "${preset}" \
    --checkpoint "${TMP}/${preset}.ckpt.safetensors" --output "${TMP}/${preset}.safetensors"
  install_fixture "${TMP}/${preset}.safetensors" "${OUT}/${preset}.safetensors"
  # kohya's long captions (max_token_length 75 / 150 / 225) on the same checkpoint.
  nice "${PY}" "${ORACLE}/make_long_caption_fixture.py" --preset "${preset}" \
    --checkpoint "${TMP}/${preset}.ckpt.safetensors" \
    --output "${TMP}/long_captions_${preset}.safetensors"
  install_fixture "${TMP}/long_captions_${preset}.safetensors" \
    "${OUT}/long_captions_${preset}.safetensors"
done

# 1b. The samplers of sample images (kohya's sample_sampler names) on the tiny checkpoint.
if [[ -f "${TMP}/tiny.ckpt.safetensors" ]]; then
  nice "${PY}" "${ORACLE}/make_sampler_fixture.py" --checkpoint "${TMP}/tiny.ckpt.safetensors" \
    --output "${TMP}/samplers.safetensors"
  install_fixture "${TMP}/samplers.safetensors" "${OUT}/samplers.safetensors"
fi

# 2. Tokenizer ids, the DDPM / v-prediction schedule and kohya's LR schedules.
nice "${PY}" "${ORACLE}/make_tokenizer_fixture.py" --output "${TMP}/tokenizer_open_clip.json"
install_fixture "${TMP}/tokenizer_open_clip.json" "${OUT}/tokenizer_open_clip.json"
nice "${PY}" "${ORACLE}/make_schedule_fixture.py" --output "${TMP}/ddpm_v_prediction.safetensors"
install_fixture "${TMP}/ddpm_v_prediction.safetensors" "${OUT}/ddpm_v_prediction.safetensors"
nice "${PY}" "${ORACLE}/make_lr_schedule_fixture.py" --output "${TMP}/lr_schedules.json"
install_fixture "${TMP}/lr_schedules.json" "${OUT}/lr_schedules.json"
nice "${PY}" "${ORACLE}/make_loss_fixture.py" --output "${TMP}/loss_recipe.safetensors"
install_fixture "${TMP}/loss_recipe.safetensors" "${OUT}/loss_recipe.safetensors"
nice "${PY}" "${ORACLE}/make_optimizer_fixture.py" --output "${TMP}/optimizers.safetensors"
install_fixture "${TMP}/optimizers.safetensors" "${OUT}/optimizers.safetensors"
# LyCORIS adapters: lycoris-lora's loader and forward on fixed LoHa / LoKr / DoRA weights.
for algo in loha lokr dora; do
  nice "${PY}" "${ORACLE}/make_lycoris_fixture.py" --algo "${algo}" \
    --output "${TMP}/lycoris_${algo}.safetensors"
  install_fixture "${TMP}/lycoris_${algo}.safetensors" "${OUT}/lycoris_${algo}.safetensors"
done
# kohya networks.oft's rotation, computed by lycoris-lora's diag-OFT functional code.
nice "${PY}" "${ORACLE}/make_oft_fixture.py" --output "${TMP}/oft.safetensors"
install_fixture "${TMP}/oft.safetensors" "${OUT}/oft.safetensors"

# 3. kohya-LoRA oracle: lorafleet trains a LoRA on the tiny base (coordinator + 1 worker, the
#    job in tests/fixtures/oracle/lora_<case>.yaml; the base is the preset its model.architecture
#    names), diffusers' load_lora_weights loads it (make_lora_fixture.py). The trained file is a
#    fixture itself (the C++ test loads it); it is replaced only when its tensors changed. Cases
#    without a job yaml are skipped. tiny-fp16 / tiny-bf16 are tiny's job with save_precision.
#    The job runs in a scratch dir holding the base checkpoint and a .deps link (demo images,
#    BPE vocab: scripts/prepare_demo_data.sh).
COORD="${BUILD}/coordinator/lorafleet-coordinator"
WORKER="${BUILD}/worker/lorafleet-worker"
for case in tiny tiny-sd2 tiny-sdxl tiny-fp16 tiny-bf16; do
  job="${OUT}/lora_${case}.yaml"
  [[ -f "${job}" ]] || { echo "skipped:   lora ${case} (no ${job#${ROOT}/})"; continue; }
  preset="$(sed -n 's/^ *architecture: *\([^ #]*\).*/\1/p' "${job}")"
  if [[ ! -x "${COORD}" || ! -x "${WORKER}" ]]; then
    cmake --build "${BUILD}" --target lorafleet-coordinator lorafleet-worker
  fi
  [[ -d "${ROOT}/.deps/demo/train" ]] || bash "${ROOT}/scripts/prepare_demo_data.sh"
  run="${TMP}/lora_${case}"
  mkdir -p "${run}"
  ln -s "${ROOT}/.deps" "${run}/.deps"
  if ! "${TOOL}" "${FLAG}" "${preset}" --seed "${SEED}" --output "${run}/base.safetensors" \
       --force >/dev/null 2>"${TMP}/err"; then
    echo "skipped:   lora ${preset} (lorafleet-make-checkpoint: $(head -c 200 "${TMP}/err"))"
    continue
  fi
  MPI_FLAGS=(--oversubscribe --bind-to none)
  [[ "$(id -u)" -eq 0 ]] && MPI_FLAGS+=(--allow-run-as-root)
  ( cd "${run}" && "${COORD}" --config "${job}" >coordinator.log 2>&1 & cpid=$!
    cd "${run}" && nice mpirun -np 1 "${MPI_FLAGS[@]}" "${WORKER}" --no-progress-bar \
      --coordinator "$(sed -n 's/^ *listen_address: *\([^ ]*\).*/\1/p' "${job}")" \
      >worker.log 2>&1; wrc=$?
    wait "${cpid}"; crc=$?
    [[ ${wrc} -eq 0 && ${crc} -eq 0 ]] ) || {
    echo "lora ${case}: training failed; logs:" >&2
    tail -n 20 "${run}/coordinator.log" "${run}/worker.log" >&2; exit 1; }
  lora="${run}/output/lora_${case}.safetensors"
  # Training is deterministic, but the file's ss_* metadata holds the start time and session id:
  # keep the committed LoRA when its tensors are bitwise the same.
  if [[ -f "${OUT}/lora_${case}.safetensors" ]] && "${PY}" - "${lora}" \
       "${OUT}/lora_${case}.safetensors" <<'PYEOF'
import sys, torch
from safetensors.torch import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
sys.exit(0 if a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k])
                                           for k in a) else 1)
PYEOF
  then
    echo "unchanged: tests/fixtures/oracle/lora_${case}.safetensors (tensors)"
  else
    cp "${lora}" "${OUT}/lora_${case}.safetensors"
    chmod 644 "${OUT}/lora_${case}.safetensors"
    echo "updated:   tests/fixtures/oracle/lora_${case}.safetensors"
  fi
  # The expected outputs always come from the committed file (its SHA-256 is recorded).
  nice "${PY}" "${ORACLE}/make_lora_fixture.py" --preset "${preset}" \
    --checkpoint "${run}/base.safetensors" --lora "${OUT}/lora_${case}.safetensors" \
    --output "${TMP}/lora_${case}_expected.safetensors"
  install_fixture "${TMP}/lora_${case}_expected.safetensors" \
    "${OUT}/lora_${case}_expected.safetensors"
done

# 4. Full-size key listings and reference parameter counts (no weights materialised when the
#    tool has --keys-only; otherwise sd15 is written in full to a temp file, ~4 GB, ~1 min).
for preset in sd15 sdxl; do
  if "${TOOL}" --help 2>&1 | grep -q -- "--keys-only"; then
    if ! "${TOOL}" "${FLAG}" "${preset}" --keys-only --output "${TMP}/${preset}.keys" --force \
         >/dev/null 2>"${TMP}/err"; then
      echo "skipped:   ${preset} keys ($(head -c 200 "${TMP}/err"))"; continue
    fi
  elif [[ "${preset}" == sd15 ]]; then
    "${TOOL}" "${FLAG}" sd15 --seed 1 --output "${TMP}/sd15.full.safetensors" --force >/dev/null
    "${PY}" - "${TMP}/sd15.full.safetensors" "${TMP}/sd15.keys" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
with open(sys.argv[2], "w") as o:
    for k in sorted(k for k in header if k != "__metadata__"):
        o.write(k + "\t" + ",".join(map(str, header[k]["shape"])) + "\n")
PYEOF
    rm -f "${TMP}/sd15.full.safetensors"
  else
    echo "skipped:   ${preset} keys (lorafleet-make-checkpoint has no --keys-only)"; continue
  fi
  nice "${PY}" "${ORACLE}/check_full_size.py" --preset "${preset}" --keys "${TMP}/${preset}.keys" \
    --write
done
echo "done; review 'git status tests/fixtures/oracle' and rerun the C++ oracle tests"
