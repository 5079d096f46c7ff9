// The validation hold-out (kohya's dataset key validation_split, with validation_seed): which
// images of each train subset are kept out of every epoch plan to measure the validation loss.
// Decided once by the coordinator's scan; the flag travels with the dataset manifest, so every
// rank agrees on it.
#pragma once

#include <cstdint>
#include <vector>

#include "common/config/dataset_config.h"
#include "common/data/dataset.h"

namespace lf {

// For every train (non-reg) subset of dataset d with configs[d].validation_split > 0: shuffles
// the subset's images (in listing order) with a mt19937_64 stream seeded from
// (configs[d].validation_seed or `default_seed`, d, subset) and marks the last
// round(n * validation_split) of them ImageRecord::is_validation, at most n - 1 (a subset keeps
// one training image). Reg subsets are never split, as kohya's. kohya shuffles with Python's
// random; the choice here is another (fully specified) draw of the same size.
void hold_out_validation_images(Dataset& dataset, const std::vector<DatasetConfig>& configs,
                                std::uint64_t default_seed);

// The held-out images' indices into Dataset::images, in (dataset, bucket, index) order: the
// order validation batches are formed in.
std::vector<int> validation_images(const Dataset& dataset);

}  // namespace lf
