// The per-epoch plan the coordinator builds and serves: which samples form each global batch,
// in which order, with which crop, flip and caption, and which regularization samples the epoch
// uses. Every rank receives the same plan and takes its own slice, so ranks never disagree about
// data, and a resume replays exactly the same plan.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/data/dataset.h"
#include "common/image/prepared_image.h"

namespace lf {

struct PlanSample {
  int image_index = 0;      // into Dataset::images
  float loss_weight = 1.0f; // prior_loss_weight for reg samples, else 1
  CropFlip crop_flip;       // random_crop offsets / flip_aug draw; centre and no flip otherwise
  bool has_caption = false; // true: `caption` replaces the image's base caption (the subset's
  std::string caption;      // caption options are random: shuffle, dropout, tag dropout)
};

// One optimizer step: samples all from one dataset and bucket. Rank r takes
// samples[r*batch_size, min((r+1)*batch_size, size)) (maybe empty on the last batch of a bucket;
// gradients are then weighted by sample counts).
struct GlobalBatch {
  int dataset_index = 0;
  BucketReso bucket;
  int batch_size = 1;       // per rank (the dataset's batch_size)
  std::vector<PlanSample> samples;
};

struct EpochPlan {
  int epoch = 0;  // 0-based
  std::vector<GlobalBatch> batches;
  // Regularization samples of this epoch, as image indices with repeats expanded, in selection
  // order (kohya's balancing: about N_train per dataset).
  std::vector<int> reg_indices;
  int reg_images_used = 0;      // distinct reg images in this epoch
  int reg_images_unused = 0;    // reg images not in this epoch
  // reg_selection "rotate", one entry per dataset: the position (in entries of that dataset's
  // reg list, each reg image repeated num_repeats times) where this epoch's walk started and
  // where the next epoch's starts. 0 for "first" and "random".
  std::vector<std::int64_t> reg_cursor_begin;
  std::vector<std::int64_t> reg_cursor_end;
  std::int64_t num_samples() const;
};

struct PlanOptions {
  std::uint64_t seed = 0;   // the shared seed
  int world_size = 1;
  double prior_loss_weight = 1.0;
  std::string reg_selection = "first";  // first | random | rotate
};

// Per-reg-image repeat counts of one dataset under kohya's default rule
// (DreamBoothDataset.__init__): walk the dataset's reg images in order adding their num_repeats
// until >= N_train, then cycle +1 each. Returned vector is parallel to that dataset's reg images
// in Dataset::images order (0 = unused). Throws std::invalid_argument for a dataset_index out of
// range.
std::vector<int> kohya_reg_repeats(const Dataset& dataset, int dataset_index);

// Deterministic: same dataset, options and epoch give the same plan on any machine (own
// Fisher-Yates over mt19937_64 streams derived from (seed, epoch), not std::shuffle).
// Samples per dataset: train images x num_repeats (weight 1) and the reg samples chosen by
// reg_selection (weight prior_loss_weight):
//   first  — kohya's rule, the same samples every epoch;
//   random — R = N_train samples drawn afresh each epoch from the reg images x num_repeats;
//   rotate — R consecutive entries of that list starting where the previous epoch stopped
//            (cursor = epoch * R mod its length), wrapping around.
// Grouped by (dataset, bucket) in sorted order, each group shuffled and cut into global batches
// of world_size * batch_size (the last of a group may be smaller), then the batch order is
// shuffled. Per-sample crop/flip/caption draws come from a separate stream per sample position,
// so enabling them does not change the order. Throws std::invalid_argument (naming the image
// where one is at fault) for world_size < 1, epoch < 0, an unknown reg_selection, a dataset
// batch_size < 1, an image whose index, dataset_index or subset_index is out of place, or a
// random_crop image whose resized size does not cover its bucket.
EpochPlan build_epoch_plan(const Dataset& dataset, const PlanOptions& options, int epoch);

// SHA-256 (hex) of everything in the plan: batches, their samples with crop, flip and caption,
// the reg selection and cursors. A checkpoint records it so that a resume can tell whether the
// dataset or any option that shapes the plan changed. Never throws except std::bad_alloc.
std::string epoch_plan_digest(const EpochPlan& plan);

// One piece of an epoch trained by a group of one size: `batches` global batches of the plan it
// was served, consumed by `world_size` ranks.
struct PlanSegment {
  int world_size = 1;
  std::int64_t batches = 0;
  bool operator==(const PlanSegment& o) const {
    return world_size == o.world_size && batches == o.batches;
  }
};

// A lineage as text, "2:3,1:4" for {{2, 3}, {1, 4}} (world_size:batches per segment; "" for
// none): its form in a checkpoint's train-state metadata. parse throws std::invalid_argument
// naming the text on anything else.
std::string format_plan_lineage(const std::vector<PlanSegment>& lineage);
std::vector<PlanSegment> parse_plan_lineage(const std::string& text);

// The plan of the same epoch for a group of new_world_size ranks that takes over after the
// first consumed_batches global batches of `plan`. The result keeps those batches unchanged
// (so batch indices, and the step_in_epoch of a checkpoint, keep counting within the epoch) and
// replaces the rest: the remaining samples, in their order in `plan`, grouped by (dataset,
// bucket), each group cut in order into global batches of new_world_size x the dataset's
// batch_size (the last of a group may be smaller), the new batches ordered by the position of
// their first sample among the remaining ones. Every remaining sample is kept exactly once,
// with its crop, flip and caption; the reg selection and cursors are unchanged. (Even on the
// plan's own world size this regroups: a group's short last batch may come early in the
// shuffled order; build_continued_epoch_plan therefore never continues onto the same size.)
// Pure and deterministic. Throws std::invalid_argument for new_world_size < 1 or
// consumed_batches outside [0, plan.batches.size()].
EpochPlan continue_epoch_plan(const EpochPlan& plan, std::int64_t consumed_batches,
                              int new_world_size);

// The plan a group trained on after a chain of world-size changes within one epoch: the plan
// of `epoch` built for lineage[0].world_size, then for each later segment i continued (as
// continue_epoch_plan) after the batches of segments 0..i-1 on lineage[i].world_size. An empty
// lineage means one segment on options.world_size (build_epoch_plan itself). A segment on the
// same world size as the one before continues the same plan unchanged (a group that resumed on
// its own size). The last segment's `batches` does not shape the plan. Throws
// std::invalid_argument as build_epoch_plan and continue_epoch_plan do (a lineage consuming more batches than exist).
EpochPlan build_continued_epoch_plan(const Dataset& dataset, const PlanOptions& options,
                                     int epoch, const std::vector<PlanSegment>& lineage);

// [begin, end) of rank's slice of a global batch: [min(r*bs, n), min((r+1)*bs, n)) with
// bs = batch.batch_size. Throws std::invalid_argument for rank < 0 or batch_size < 1.
std::pair<int, int> rank_slice(const GlobalBatch& batch, int rank);

}  // namespace lf
