// The dataset part of a LoRA file's kohya metadata (kohya sd-scripts train_network.py, the
// training metadata it builds before saving): ss_tag_frequency, ss_dataset_dirs /
// ss_reg_dataset_dirs and, for jobs with a dataset config, ss_datasets. All values are JSON text,
// as kohya's json.dumps.
//
// Tag frequencies grow with the dataset, so they are capped: the safetensors header of a LoRA
// must stay far below its 100 MB limit whatever the dataset size. Over the budget, the least
// frequent tags are left out (the most frequent ones, which tools show, are kept).
#pragma once

#include <cstddef>
#include <string>

#include "common/data/dataset.h"
#include "common/data/epoch_plan.h"

namespace lf {

// Bytes of JSON each tag-frequency value may take (ss_tag_frequency, and each dataset's
// tag_frequency inside ss_datasets).
constexpr std::size_t kTagFrequencyBudgetBytes = 8 * 1024 * 1024;

// kohya ss_tag_frequency: {image_dir basename: {tag: images whose caption holds it}}, tags from
// splitting each image's caption at "," (stripped, lower-cased, empty ones skipped), counted once
// per image (not per repeat). dataset_index -1 covers every dataset. Subsets whose basenames
// coincide share an entry (kohya keys by basename too). Over max_bytes the cap is shared fairly:
// every folder keeps its most frequent tags, round by round, so one big folder cannot leave the
// others empty. *truncated (if given) tells whether tags were left out to fit max_bytes. Never
// throws except std::bad_alloc.
std::string kohya_tag_frequency_json(const Dataset& dataset, int dataset_index,
                                     std::size_t max_bytes = kTagFrequencyBudgetBytes,
                                     bool* truncated = nullptr);

// kohya ss_bucket_info JSON: {"buckets": {"0": {"resolution": [w, h], "count": n}, ...},
// "mean_img_ar_error": x}, written as Python's json.dumps does. As kohya, count is the samples
// of the bucket in an epoch (repeats and regularization samples included, taken from the epoch
// plan), buckets in sorted order, and the mean |aspect-ratio error| is over images. Only
// dataset `dataset_index` when >= 0 (ss_datasets' per-dataset bucket_info). Never throws
// except std::bad_alloc.
std::string kohya_bucket_info_json(const Dataset& dataset, const EpochPlan& plan,
                                   int dataset_index = -1);

// kohya ss_dataset_dirs (reg = false) / ss_reg_dataset_dirs (reg = true):
// {image_dir basename: {"n_repeats": n, "img_count": images}}; a repeated basename gets " (2)",
// " (3)"... as kohya. Never throws except std::bad_alloc.
std::string kohya_dataset_dirs_json(const Dataset& dataset, bool reg);

// kohya ss_datasets (written when a dataset config is used): one entry per dataset with
// is_dreambooth, batch_size_per_device, num_train_images, num_reg_images, resolution,
// enable_bucket, min/max_bucket_reso, tag_frequency, bucket_info (from `plan`) and its subsets
// (img_count, num_repeats, color_aug, flip_aug, random_crop, shuffle_caption, keep_tokens,
// keep_tokens_separator, caption_prefix, caption_suffix, image_dir basename, class_tokens,
// is_reg). Never throws except std::bad_alloc.
std::string kohya_datasets_json(const Dataset& dataset, const EpochPlan& plan);

}  // namespace lf
