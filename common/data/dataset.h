// The scanned dataset: every training and regularization image of every dataset and subset, its
// base caption, its size and its bucket. Built once by the coordinator (scan_dataset), before
// any model loads, and sent to every worker.
//
// Folder convention as kohya sd-scripts generate_dreambooth_subsets_config_by_subdirs:
// <parent>/<num_repeats>_<class tokens>/<image>.<ext> with same-stem caption files.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/config/dataset_config.h"
#include "common/data/bucket_manager.h"
#include "common/image/decoded_image.h"

namespace lf {

// Thrown for a missing/empty dataset folder, a bad image with on_bad_image "error", a caption
// that is not UTF-8, or two images sharing a stem; what() names the paths and what was expected.
class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ImageRecord {
  int index = 0;             // position in Dataset::images (dataset, subset, file order)
  std::string path;          // absolute path
  // Caption file's first line, or the subset's class tokens; with the subset's fixed
  // caption_prefix/suffix already joined unless its captions are random (then the epoch plan
  // processes them per sample).
  std::string caption;
  int dataset_index = 0;     // into Dataset::datasets
  int subset_index = 0;      // into Dataset::subsets
  bool is_reg = false;
  // Held out of every epoch plan for the validation loss (validation_split.h); false for reg.
  bool is_validation = false;
  int num_repeats = 1;       // the subset's
  int width = 0;             // decoded size after EXIF orientation, pixels
  int height = 0;
  bool has_alpha = false;    // the file has an alpha channel (or palette transparency)
  std::string content_sha256;  // SHA-256 of the file's bytes (latent cache key)
  BucketSelection bucket;    // bucket and resize target
};

struct SubsetInfo {
  std::string name;          // folder name, e.g. "10_photo"
  std::string image_dir;     // absolute folder path
  int dataset_index = 0;
  int image_count = 0;       // images kept for training (bad ones skipped with on_bad_image: skip)
  int validation_count = 0;  // images held out for validation (not in image_count)
  SubsetConfig config;       // num_repeats, is_reg, class_tokens, caption and augmentation keys
};

struct DatasetInfo {
  BucketOptions buckets;     // in effect (min/max rounded to bucket_reso_steps)
  int batch_size = 1;        // per rank
  std::vector<BucketReso> predefined_buckets;  // empty in bucket_no_upscale mode
  // Sum over train subsets of num_repeats * image_count (kohya's N_train, per dataset).
  std::int64_t num_train_samples = 0;
  // Sum over reg subsets of num_repeats * image_count (kohya's N_reg_raw; ss_num_reg_images).
  std::int64_t num_reg_samples_raw = 0;
  int num_validation_images = 0;  // held out (validation_split), each once
};

struct BadImage {
  std::string path;
  std::string reason;        // "<path>: <why>" (decoder, caption or bucket message)
};

struct Dataset {
  std::vector<ImageRecord> images;
  std::vector<SubsetInfo> subsets;
  std::vector<DatasetInfo> datasets;
  std::vector<std::string> warnings;  // for the caller to log
  std::vector<BadImage> bad_images;   // skipped (on_bad_image: skip); empty otherwise
  // Totals over all datasets.
  std::int64_t num_train_samples = 0;
  std::int64_t num_reg_samples_raw = 0;
  int num_validation_images = 0;
};

struct ScanOptions {
  std::vector<DatasetConfig> datasets;  // from JobConfig::datasets
  std::string on_bad_image = "error";   // "error": stop listing every bad file; "skip": drop
  DecodeOptions decode;
  int threads = 0;                      // decode threads; 0 = std::thread::hardware_concurrency
  // The validation hold-out's seed where a dataset gives no validation_seed (training.seed).
  std::uint64_t validation_seed = 0;
};

// Scans every dataset: lists the subsets (form 1: "<n>_<tokens>" folders of train/reg_data_dir,
// walked in sorted byte order), lists images (png/jpg/jpeg/webp/bmp in any case; hidden and
// "._*" files ignored; sorted by name), reads captions (caption.h), fully decodes every image once
// on `threads` threads (so bad files fail here, before any model loads), and assigns buckets.
// Bad images (undecodable, too large, too small for any bucket, a non-UTF-8 file name or caption
// file) are all listed in one DatasetError with on_bad_image "error", or dropped with a warning
// each with "skip". Also throws DatasetError naming the folders or files for: a missing train/reg
// folder or image_dir, a non-UTF-8 subset folder name, images sharing a stem in one folder (all
// pairs listed), and no training image at all (with the layout hint and the scan's warnings).
// Datasets with validation_split hold images out (hold_out_validation_images); the counts
// (image_count, num_train_samples) are of the training images only, as kohya's training
// dataset's.
Dataset scan_dataset(const ScanOptions& options);

}  // namespace lf
