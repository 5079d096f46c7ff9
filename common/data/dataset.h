// The scanned dataset: every training and regularization image, its caption and its bucket.
// Folder convention as kohya sd-scripts generate_dreambooth_subsets_config_by_subdirs:
// <parent>/<num_repeats>_<class tokens>/<image>.<ext> with same-stem caption files.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/data/bucket_manager.h"

namespace lf {

// Thrown for a missing/empty dataset folder or an image that does not decode; what() names
// the path and what was expected.
class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ImageRecord {
  int index = 0;             // position in Dataset::images (train images first, then reg)
  std::string path;          // absolute path
  std::string caption;       // caption file text (trimmed) or the subset's class tokens
  std::string subset;        // folder name, e.g. "10_photo"
  bool is_reg = false;
  int num_repeats = 1;       // from the folder name
  int width = 0;             // decoded size, pixels
  int height = 0;
  BucketSelection bucket;    // bucket and resize target
};

struct SubsetInfo {
  std::string name;          // folder name
  std::string class_tokens;  // after the first '_'
  int num_repeats = 1;
  bool is_reg = false;
  int image_count = 0;
};

struct Dataset {
  std::vector<ImageRecord> images;
  std::vector<SubsetInfo> subsets;
  std::vector<BucketReso> predefined_buckets;
  std::vector<std::string> warnings;  // for the caller to log
  // Sum over train subsets of num_repeats * image_count (kohya's N_train).
  std::int64_t num_train_samples = 0;
  // Sum over reg subsets of num_repeats * image_count (kohya's N_reg_raw; ss_num_reg_images).
  std::int64_t num_reg_samples_raw = 0;
};

struct ScanOptions {
  std::string train_data_dir;
  std::string reg_data_dir;
  std::string caption_extension = ".txt";
  BucketOptions buckets;
};

// Scans both folders, fully decodes every image once (so bad files fail before any model loads)
// and assigns each image its bucket. Subsets and files are walked in sorted (byte) order; kohya
// uses directory order for subsets. Subset folders "<int>_<tokens>" (or just "<int>") with
// int >= 1; other folders are skipped with a warning, hidden ones silently. Images: png, jpg,
// jpeg, webp, bmp in any case, not hidden ("._*" included). Caption: "<stem><ext>", else (kohya
// face-crop names) the stem minus its last four "_" tokens, else the class tokens; the whole
// file is kept (kohya uses its first line) with the BOM stripped, CRLF -> LF, trimmed.
// Throws DatasetError naming the folder or file: missing/non-directory train or reg folder, no
// training images, an image that does not decode or gives no bucket, an empty caption file.
Dataset scan_dreambooth_dataset(const ScanOptions& options);

}  // namespace lf
