// hold_out_validation_images, validation_images (see header).
#include "common/data/validation_split.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "common/data/plan_rng.h"

namespace lf {

namespace {

// ASCII "valsplit": keeps this stream apart from the epoch plans' streams.
constexpr std::uint64_t kValidationDomain = 0x76616C73706C6974ULL;

std::uint64_t subset_seed(std::uint64_t seed, std::size_t dataset, std::size_t subset) {
  const std::uint64_t base = splitmix64_mix(seed ^ kValidationDomain);
  return splitmix64_mix(splitmix64_mix(base + (dataset + 1) * kGoldenGamma) +
                        (subset + 1) * kGoldenGamma);
}

}  // namespace

void hold_out_validation_images(Dataset& dataset, const std::vector<DatasetConfig>& configs,
                                std::uint64_t default_seed) {
  for (std::size_t s = 0; s < dataset.subsets.size(); ++s) {
    const SubsetInfo& subset = dataset.subsets[s];
    const auto d = static_cast<std::size_t>(subset.dataset_index);
    if (subset.config.is_reg || d >= configs.size() || configs[d].validation_split <= 0.0) {
      continue;
    }
    std::vector<int> members;
    for (const ImageRecord& img : dataset.images) {
      if (img.subset_index == static_cast<int>(s)) members.push_back(img.index);
    }
    const auto n = static_cast<std::int64_t>(members.size());
    const std::int64_t held = std::min<std::int64_t>(
        std::llround(static_cast<double>(n) * configs[d].validation_split), n - 1);
    if (held <= 0) continue;
    const std::uint64_t seed = configs[d].validation_seed
                                   ? static_cast<std::uint64_t>(*configs[d].validation_seed)
                                   : default_seed;
    std::mt19937_64 rng(subset_seed(seed, d, s));
    fisher_yates(members, rng);
    for (std::int64_t i = n - held; i < n; ++i) dataset.images[members[i]].is_validation = true;
  }
}

std::vector<int> validation_images(const Dataset& dataset) {
  std::vector<int> out;
  for (const ImageRecord& img : dataset.images) {
    if (img.is_validation) out.push_back(img.index);
  }
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
    const ImageRecord& x = dataset.images[a];
    const ImageRecord& y = dataset.images[b];
    return std::make_tuple(x.dataset_index, x.bucket.bucket.width, x.bucket.bucket.height) <
           std::make_tuple(y.dataset_index, y.bucket.bucket.width, y.bucket.bucket.height);
  });
  return out;
}

}  // namespace lf
