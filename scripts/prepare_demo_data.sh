#!/usr/bin/env bash
# Lays out the demo dataset in kohya's DreamBooth folder convention from the photographs that
# Debian's python3-skimage ships (extracted by install_deps.sh) and the captions in
# configs/demo/captions/:
#   .deps/demo/train/10_photo/<name>.<ext> + <name>.txt   colour photos, 10 repeats
#   .deps/demo/reg/1_photo/<name>.png                     greyscale photos (class token captions)
# Idempotent: files already in place are left alone.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/.deps/skimage/usr/lib/python3/dist-packages/skimage/data"
DEMO="$ROOT/.deps/demo"
[ -d "$SRC" ] || { echo "prepare_demo_data: $SRC missing; run scripts/install_deps.sh" >&2; exit 1; }

TRAIN="$DEMO/train/10_photo"
REG="$DEMO/reg/1_photo"
mkdir -p "$TRAIN" "$REG"
for f in astronaut.png chelsea.png coffee.png rocket.jpg motorcycle_left.png motorcycle_right.png \
         hubble_deep_field.jpg retina.jpg ihc.png color.png; do
  stem="${f%.*}"
  [ -f "$TRAIN/$f" ] || cp "$SRC/$f" "$TRAIN/$f"
  cp "$ROOT/configs/demo/captions/$stem.txt" "$TRAIN/$stem.txt"
done
for f in camera.png coins.png moon.png grass.png gravel.png brick.png cell.png clock_motion.png \
         page.png; do
  [ -f "$REG/$f" ] || cp "$SRC/$f" "$REG/$f"
done
echo "[demo-data] $(ls "$TRAIN" | grep -vc '\.txt$') training images in $TRAIN"
echo "[demo-data] $(ls "$REG" | wc -l) regularization images in $REG"
