// Aspect-ratio buckets, as kohya sd-scripts BucketManager (library/train_util.py) and
// model_util.make_bucket_resolutions. Sizes are in pixels, (width, height).
#pragma once

#include <string>
#include <vector>

namespace lf {

struct BucketReso {
  int width = 0;
  int height = 0;
  bool operator==(const BucketReso& o) const { return width == o.width && height == o.height; }
  bool operator<(const BucketReso& o) const {
    return width != o.width ? width < o.width : height < o.height;
  }
};

// Result of choosing a bucket for one image: resize the image to `resized` (covering the
// bucket), then centre-crop to `bucket`. ar_error = bucket_ar - image_ar.
struct BucketSelection {
  BucketReso bucket;
  int resized_width = 0;
  int resized_height = 0;
  double ar_error = 0.0;
};

// kohya make_bucket_resolutions(max_reso=(W,H), min_size, max_size, divisible): the square
// plus every (w,h)/(h,w) pair; deduplicated and sorted ascending by (w,h).
std::vector<BucketReso> make_bucket_resolutions(int max_w, int max_h, int min_size, int max_size,
                                                int divisible);

struct BucketOptions {
  int resolution_w = 512;
  int resolution_h = 512;
  bool enable_bucket = true;
  int min_bucket_reso = 256;
  int max_bucket_reso = 1024;
  int bucket_reso_steps = 64;
  bool bucket_no_upscale = false;
};

class BucketManager {
 public:
  // Rounds min (down) / max (up) to bucket_reso_steps with a warning, as kohya
  // adjust_min_max_bucket_reso_by_steps. Throws std::invalid_argument for non-positive sizes
  // or steps, and when min(resolution) < min_bucket_reso or max(resolution) > max_bucket_reso.
  explicit BucketManager(const BucketOptions& options);

  // Predefined bucket list (upscale mode); empty in bucket_no_upscale mode; the single
  // resolution bucket when enable_bucket is false.
  const std::vector<BucketReso>& predefined() const { return buckets_; }

  // kohya select_bucket(w, h). In bucket_no_upscale mode, an image larger than the target area
  // whose floored bucket wastes area gets the larger bucket that still fits with an aspect
  // ratio at least as close (2000x1950 at 1024: (1024,1024), not kohya's (960,960)).
  // Throws std::invalid_argument for w or h <= 0, or when the image is too small to give a
  // bucket with both sides > 0.
  BucketSelection select(int width, int height) const;

  // The options in effect: min/max_bucket_reso after rounding to bucket_reso_steps.
  const BucketOptions& options() const { return options_; }
  // Warnings produced while adjusting options (rounded min/max, a single bucket), for the
  // caller to log.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  BucketOptions options_;
  std::vector<BucketReso> buckets_;
  std::vector<std::string> warnings_;
};

}  // namespace lf
