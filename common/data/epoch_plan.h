// The per-epoch plan the coordinator builds and serves: which samples form each global batch,
// in which order, and which regularization samples the epoch uses. Every rank receives the same
// plan and takes its own slice, so ranks never disagree about data order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/data/dataset.h"

namespace lf {

struct PlanSample {
  int image_index = 0;      // into Dataset::images
  float loss_weight = 1.0f; // prior_loss_weight for reg samples, else 1
};

// One optimizer step: samples all from one bucket. Rank r takes
// samples[r*train_batch_size, min((r+1)*train_batch_size, size)) (maybe empty on the last
// batch of a bucket; gradients are then weighted by sample counts).
struct GlobalBatch {
  BucketReso bucket;
  std::vector<PlanSample> samples;
};

struct EpochPlan {
  int epoch = 0;  // 0-based
  std::vector<GlobalBatch> batches;
  // Registered regularization samples of this epoch, as image indices with repeats expanded
  // (kohya's balancing: sum equals N_train when enough reg images exist).
  std::vector<int> reg_indices;
  std::int64_t num_samples() const;
};

struct PlanOptions {
  std::uint64_t seed = 0;   // the shared seed
  int world_size = 1;
  int train_batch_size = 1; // per rank
  double prior_loss_weight = 1.0;
  std::string reg_selection = "first";
};

// Per-reg-image repeat counts under kohya's default rule (DreamBoothDataset.__init__): walk
// reg images in order adding their num_repeats until >= N_train, then cycle +1 each.
// Returned vector is parallel to the reg images in Dataset::images order (0 = unused).
std::vector<int> kohya_reg_repeats(const Dataset& dataset);

// Deterministic: same dataset, options and epoch give the same plan on any machine (own
// Fisher-Yates over a SplitMix64/mt19937_64 stream, not std::shuffle). Samples: train images x
// num_repeats (weight 1) and reg images x kohya_reg_repeats (weight prior_loss_weight), grouped
// by bucket in sorted order. RNG: std::mt19937_64(splitmix64_mix(seed + (epoch+1)*0x9E37..7C15));
// each bucket's list is shuffled (buckets in order), cut into global batches of
// world_size*train_batch_size (the last of a bucket may be smaller), then the batch order is
// shuffled. Draws in [0, n) reject values below 2^64 mod n. Throws std::invalid_argument for
// world_size or train_batch_size < 1, epoch < 0, or reg_selection other than "first".
EpochPlan build_epoch_plan(const Dataset& dataset, const PlanOptions& options, int epoch);

// [begin, end) of rank's slice of a global batch: [min(r*tbs, n), min((r+1)*tbs, n)).
// Throws std::invalid_argument for rank < 0 or train_batch_size < 1.
std::pair<int, int> rank_slice(const GlobalBatch& batch, int rank, int train_batch_size);

}  // namespace lf
