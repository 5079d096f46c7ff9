"""Reads a TensorBoard run folder with the tensorboard package's own event reader
(EventAccumulator, as `tensorboard --logdir` loads it, but keeping events a restarted
writer would have purged, so that duplicated steps show) and prints what it holds as JSON:
  {"scalars": {tag: [[step, value], ...]},
   "texts":   {tag: [[step, text], ...]},
   "images":  {tag: [[step, width, height], ...]}}
Used by integration_test_tensorboard; needs only `tensorboard` (installed into .venv by
scripts/install_deps.sh)."""
import json
import sys

from tensorboard.backend.event_processing import event_accumulator


def main(path):
    acc = event_accumulator.EventAccumulator(
        path, purge_orphaned_data=False, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.IMAGES: 0,
                             event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    out = {"scalars": {}, "texts": {}, "images": {}}
    for tag in tags["scalars"]:
        out["scalars"][tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
    for tag in tags["tensors"]:
        out["texts"][tag] = [[e.step, e.tensor_proto.string_val[0].decode("utf-8")]
                             for e in acc.Tensors(tag)]
    for tag in tags["images"]:
        out["images"][tag] = [[e.step, e.width, e.height] for e in acc.Images(tag)]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
