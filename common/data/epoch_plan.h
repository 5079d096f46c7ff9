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

// [begin, end) of rank's slice of a global batch: [min(r*bs, n), min((r+1)*bs, n)) with
// bs = batch.batch_size. Throws std::invalid_argument for rank < 0 or batch_size < 1.
std::pair<int, int> rank_slice(const GlobalBatch& batch, int rank);

}  // namespace lf
