// Epoch plans: kohya's sample list (train images x num_repeats plus the balanced reg prefix of
// DreamBoothDataset.__init__), grouped by bucket and shuffled with a fully specified RNG
// (SplitMix64 -> mt19937_64 -> own Fisher-Yates), so every machine builds identical plans.
#include "common/data/epoch_plan.h"

#include <algorithm>
#include <map>
#include <random>
#include <stdexcept>

namespace lf {
namespace {

constexpr std::uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;

// SplitMix64 finaliser (Steele, Lea, Flood 2014; the constants of java.util.SplittableRandom).
std::uint64_t splitmix64_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The epoch's RNG seed is output number `epoch` (0-based) of a SplitMix64 generator seeded with
// `seed`: mix(seed + (epoch + 1) * gamma). Neighbouring (seed, epoch) pairs give unrelated seeds.
std::uint64_t epoch_rng_seed(std::uint64_t seed, int epoch) {
  return splitmix64_mix(seed + (static_cast<std::uint64_t>(epoch) + 1) * kGoldenGamma);
}

// Uniform integer in [0, bound), bound >= 1, by rejection (as OpenBSD arc4random_uniform):
// draws below 2^64 mod bound are rejected so every residue is equally likely.
std::uint64_t bounded(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    const std::uint64_t x = rng();
    if (x >= threshold) return x % bound;
  }
}

// Fisher-Yates (Durstenfeld): i from the end, swap with a uniform j in [0, i].
template <typename T>
void fisher_yates(std::vector<T>& v, std::mt19937_64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(bounded(rng, i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace

std::int64_t EpochPlan::num_samples() const {
  std::int64_t n = 0;
  for (const auto& b : batches) n += static_cast<std::int64_t>(b.samples.size());
  return n;
}

std::vector<int> kohya_reg_repeats(const Dataset& dataset) {
  std::vector<int> reg_repeats;  // the reg images' own num_repeats, in dataset order
  for (const auto& img : dataset.images) {
    if (img.is_reg) reg_repeats.push_back(img.num_repeats);
  }
  std::vector<int> counts(reg_repeats.size(), 0);
  if (reg_repeats.empty()) return counts;
  const std::int64_t n_train = dataset.num_train_samples;
  std::int64_t n = 0;
  // First pass: register each image with its own num_repeats until n >= N_train.
  for (std::size_t i = 0; i < reg_repeats.size() && n < n_train; ++i) {
    counts[i] = reg_repeats[i];
    n += reg_repeats[i];
  }
  // Later passes: +1 to each image in order until N_train.
  while (n < n_train) {
    for (std::size_t i = 0; i < counts.size() && n < n_train; ++i) {
      ++counts[i];
      ++n;
    }
  }
  return counts;
}

EpochPlan build_epoch_plan(const Dataset& dataset, const PlanOptions& options, int epoch) {
  if (options.world_size < 1 || options.train_batch_size < 1 || epoch < 0) {
    throw std::invalid_argument(
        "build_epoch_plan: expected world_size >= 1, train_batch_size >= 1, epoch >= 0, got " +
        std::to_string(options.world_size) + ", " + std::to_string(options.train_batch_size) +
        ", " + std::to_string(epoch));
  }
  if (options.reg_selection != "first") {
    throw std::invalid_argument("build_epoch_plan: reg_selection '" + options.reg_selection +
                                "' is not supported (expected 'first')");
  }
  EpochPlan plan;
  plan.epoch = epoch;

  const std::vector<int> reg_counts = kohya_reg_repeats(dataset);
  std::map<BucketReso, std::vector<PlanSample>> by_bucket;  // sorted by (width, height)
  std::size_t reg_i = 0;
  for (const auto& img : dataset.images) {
    const int repeats = img.is_reg ? reg_counts[reg_i++] : img.num_repeats;
    const float weight = img.is_reg ? static_cast<float>(options.prior_loss_weight) : 1.0f;
    for (int r = 0; r < repeats; ++r) {
      by_bucket[img.bucket.bucket].push_back({img.index, weight});
      if (img.is_reg) plan.reg_indices.push_back(img.index);
    }
  }

  std::mt19937_64 rng(epoch_rng_seed(options.seed, epoch));
  const std::size_t global_batch =
      static_cast<std::size_t>(options.world_size) * options.train_batch_size;
  for (auto& [bucket, samples] : by_bucket) {
    fisher_yates(samples, rng);
    for (std::size_t begin = 0; begin < samples.size(); begin += global_batch) {
      const std::size_t end = std::min(samples.size(), begin + global_batch);
      GlobalBatch batch;
      batch.bucket = bucket;
      batch.samples.assign(samples.begin() + static_cast<std::ptrdiff_t>(begin),
                           samples.begin() + static_cast<std::ptrdiff_t>(end));
      plan.batches.push_back(std::move(batch));
    }
  }
  fisher_yates(plan.batches, rng);
  return plan;
}

std::pair<int, int> rank_slice(const GlobalBatch& batch, int rank, int train_batch_size) {
  if (rank < 0 || train_batch_size < 1) {
    throw std::invalid_argument("rank_slice: expected rank >= 0 and train_batch_size >= 1, got " +
                                std::to_string(rank) + ", " + std::to_string(train_batch_size));
  }
  const auto n = static_cast<std::int64_t>(batch.samples.size());
  const std::int64_t begin = std::min<std::int64_t>(
      static_cast<std::int64_t>(rank) * train_batch_size, n);
  const std::int64_t end = std::min<std::int64_t>(
      (static_cast<std::int64_t>(rank) + 1) * train_batch_size, n);
  return {static_cast<int>(begin), static_cast<int>(end)};
}

}  // namespace lf
