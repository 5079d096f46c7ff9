// Aspect-ratio bucketing exactly as kohya sd-scripts: make_bucket_resolutions (model_util.py),
// BucketManager.select_bucket and adjust_min_max_bucket_reso_by_steps (train_util.py), with the
// same double-precision arithmetic and numpy-argmin tie rule, so images land in kohya's buckets.
#include "common/data/bucket_manager.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <stdexcept>

namespace lf {
namespace {

std::string size_str(std::int64_t w, std::int64_t h) {
  return std::to_string(w) + "x" + std::to_string(h);
}

// floor(sqrt(v)) for v >= 0, exact for all 64-bit v (no float rounding at perfect squares).
std::int64_t isqrt(std::int64_t v) {
  auto r = static_cast<std::int64_t>(std::sqrt(static_cast<double>(v)));
  while (r > 0 && r * r > v) --r;
  while ((r + 1) * (r + 1) <= v) ++r;
  return r;
}

// kohya BucketManager.round_to_steps: round to an integer, then floor to a multiple of steps.
int round_to_steps(double x, int steps) {
  const auto r = static_cast<std::int64_t>(x + 0.5);
  return static_cast<int>(r - r % steps);
}


// lorafleet's one change to kohya's bucket_no_upscale rule. kohya floors both sides to
// bucket_reso_steps, which can drop a near-square image larger than the target area to a smaller
// square than fits: 2000x1950 at resolution 1024 gets (960,960) although (1024,1024) has the
// target area and a closer aspect ratio. So, starting from kohya's bucket, grow it by one step on
// either or both sides while the area stays <= max_area, the bucket stays within the image (no
// upscaling) and |bucket_ar - image_ar| does not get worse; prefer the largest such bucket. When
// it grows, the image is resized to cover the new bucket as in upscale mode. Every image kohya
// already buckets without loss (e.g. 1000x750 -> 512x384 at 512) keeps kohya's result.
void grow_no_upscale_bucket(int width, int height, std::int64_t max_area, int steps,
                            BucketSelection* sel) {
  const double ar = static_cast<double>(width) / height;
  auto ar_err = [ar](int w, int h) { return std::fabs(static_cast<double>(w) / h - ar); };
  BucketReso b = sel->bucket;
  bool grew = false;
  for (;;) {
    const BucketReso candidates[3] = {
        {b.width + steps, b.height + steps}, {b.width + steps, b.height}, {b.width, b.height + steps}};
    const double current = ar_err(b.width, b.height);
    const BucketReso* best = nullptr;
    for (const BucketReso& c : candidates) {
      if (static_cast<std::int64_t>(c.width) * c.height > max_area || c.width > width ||
          c.height > height || ar_err(c.width, c.height) > current + 1e-12) {
        continue;
      }
      if (best == nullptr ||
          static_cast<std::int64_t>(c.width) * c.height >
              static_cast<std::int64_t>(best->width) * best->height) {
        best = &c;
      }
    }
    if (best == nullptr) break;
    b = *best;
    grew = true;
  }
  if (!grew) return;
  sel->bucket = b;
  const double scale = ar > static_cast<double>(b.width) / b.height
                           ? static_cast<double>(b.height) / height
                           : static_cast<double>(b.width) / width;
  sel->resized_width = std::max(b.width, static_cast<int>(width * scale + 0.5));
  sel->resized_height = std::max(b.height, static_cast<int>(height * scale + 0.5));
}

}  // namespace

std::vector<BucketReso> make_bucket_resolutions(int max_w, int max_h, int min_size, int max_size,
                                                int divisible) {
  if (max_w <= 0 || max_h <= 0 || min_size <= 0 || max_size <= 0 || divisible <= 0) {
    throw std::invalid_argument(
        "make_bucket_resolutions: expected positive sizes, got resolution " +
        size_str(max_w, max_h) + ", min " + std::to_string(min_size) + ", max " +
        std::to_string(max_size) + ", steps " + std::to_string(divisible));
  }
  const std::int64_t max_area = static_cast<std::int64_t>(max_w) * max_h;
  std::set<BucketReso> resos;
  const auto square = static_cast<int>(isqrt(max_area) / divisible * divisible);
  if (square <= 0) {
    throw std::invalid_argument("make_bucket_resolutions: resolution " + size_str(max_w, max_h) +
                                " gives a square bucket of side 0 with steps " +
                                std::to_string(divisible));
  }
  resos.insert({square, square});
  for (int width = min_size; width <= max_size; width += divisible) {
    const auto height = static_cast<int>(
        std::min<std::int64_t>(max_size, max_area / width / divisible * divisible));
    if (height >= min_size) {
      resos.insert({width, height});
      resos.insert({height, width});
    }
  }
  return {resos.begin(), resos.end()};
}

BucketManager::BucketManager(const BucketOptions& options) : options_(options) {
  BucketOptions& o = options_;
  if (o.resolution_w <= 0 || o.resolution_h <= 0) {
    throw std::invalid_argument("bucket options: resolution must be positive, got " +
                                size_str(o.resolution_w, o.resolution_h));
  }
  if (!o.enable_bucket) {
    // kohya: BucketManager(False, resolution, None, None, None) with the one predefined reso.
    buckets_.push_back({o.resolution_w, o.resolution_h});
    return;
  }
  const int steps = o.bucket_reso_steps;
  if (steps <= 0 || o.min_bucket_reso <= 0 || o.max_bucket_reso <= 0) {
    throw std::invalid_argument(
        "bucket options: min_bucket_reso, max_bucket_reso and bucket_reso_steps must be "
        "positive, got " + std::to_string(o.min_bucket_reso) + ", " +
        std::to_string(o.max_bucket_reso) + ", " + std::to_string(steps));
  }
  if (o.min_bucket_reso % steps != 0) {
    const int adjusted = o.min_bucket_reso - o.min_bucket_reso % steps;
    warnings_.push_back("min_bucket_reso " + std::to_string(o.min_bucket_reso) +
                        " is not a multiple of bucket_reso_steps " + std::to_string(steps) +
                        "; rounded down to " + std::to_string(adjusted));
    o.min_bucket_reso = adjusted;
  }
  if (o.max_bucket_reso % steps != 0) {
    const int adjusted = o.max_bucket_reso + steps - o.max_bucket_reso % steps;
    warnings_.push_back("max_bucket_reso " + std::to_string(o.max_bucket_reso) +
                        " is not a multiple of bucket_reso_steps " + std::to_string(steps) +
                        "; rounded up to " + std::to_string(adjusted));
    o.max_bucket_reso = adjusted;
  }
  if (o.min_bucket_reso <= 0) {
    throw std::invalid_argument("bucket options: min_bucket_reso rounds down to 0; expected a "
                                "value >= bucket_reso_steps " + std::to_string(steps));
  }
  if (std::min(o.resolution_w, o.resolution_h) < o.min_bucket_reso) {
    throw std::invalid_argument("bucket options: min_bucket_reso " +
                                std::to_string(o.min_bucket_reso) +
                                " must be <= the smaller resolution side (resolution " +
                                size_str(o.resolution_w, o.resolution_h) + ")");
  }
  if (std::max(o.resolution_w, o.resolution_h) > o.max_bucket_reso) {
    throw std::invalid_argument("bucket options: max_bucket_reso " +
                                std::to_string(o.max_bucket_reso) +
                                " must be >= the larger resolution side (resolution " +
                                size_str(o.resolution_w, o.resolution_h) + ")");
  }
  if (o.bucket_no_upscale) {
    warnings_.push_back(
        "min_bucket_reso and max_bucket_reso are ignored with bucket_no_upscale: buckets come "
        "from each image's own size");
    return;
  }
  buckets_ = make_bucket_resolutions(o.resolution_w, o.resolution_h, o.min_bucket_reso,
                                     o.max_bucket_reso, steps);
  if (buckets_.size() == 1) {
    warnings_.push_back(
        "the bucket options give a single bucket " +
        size_str(buckets_[0].width, buckets_[0].height) + " (resolution " +
        size_str(o.resolution_w, o.resolution_h) + ", min_bucket_reso " +
        std::to_string(o.min_bucket_reso) + ", max_bucket_reso " +
        std::to_string(o.max_bucket_reso) + ", bucket_reso_steps " + std::to_string(steps) +
        "): every image is cropped to it; lower min_bucket_reso or raise max_bucket_reso for "
        "aspect-ratio bucketing");
  }
}

BucketSelection BucketManager::select(int width, int height) const {
  if (width <= 0 || height <= 0) {
    throw std::invalid_argument("select bucket: image size must be positive, got " +
                                size_str(width, height));
  }
  const double aspect_ratio = static_cast<double>(width) / height;
  BucketSelection sel;
  const bool no_upscale = options_.enable_bucket && options_.bucket_no_upscale;
  if (!no_upscale) {
    const BucketReso exact{width, height};
    if (std::find(buckets_.begin(), buckets_.end(), exact) != buckets_.end()) {
      sel.bucket = exact;
    } else {
      // numpy argmin: the first minimum in sorted order wins ties.
      double best = 0.0;
      for (std::size_t i = 0; i < buckets_.size(); ++i) {
        const double err = std::fabs(
            static_cast<double>(buckets_[i].width) / buckets_[i].height - aspect_ratio);
        if (i == 0 || err < best) {
          best = err;
          sel.bucket = buckets_[i];
        }
      }
    }
    const double bucket_ar = static_cast<double>(sel.bucket.width) / sel.bucket.height;
    // Scale so the image covers the bucket: match height when the image is wider.
    const double scale = aspect_ratio > bucket_ar
                             ? static_cast<double>(sel.bucket.height) / height
                             : static_cast<double>(sel.bucket.width) / width;
    sel.resized_width = static_cast<int>(width * scale + 0.5);
    sel.resized_height = static_cast<int>(height * scale + 0.5);
  } else {
    const int steps = options_.bucket_reso_steps;
    const std::int64_t max_area =
        static_cast<std::int64_t>(options_.resolution_w) * options_.resolution_h;
    if (static_cast<std::int64_t>(width) * height > max_area) {
      // Shrink keeping the aspect ratio; pick the step-rounding that best keeps it.
      const double rw = std::sqrt(static_cast<double>(max_area) * aspect_ratio);
      const double rh = static_cast<double>(max_area) / rw;
      const int bw = round_to_steps(rw, steps);
      const int bh_a = round_to_steps(bw / aspect_ratio, steps);
      const int bh = round_to_steps(rh, steps);
      const int bw_b = round_to_steps(bh * aspect_ratio, steps);
      if (bw <= 0 || bh_a <= 0 || bh <= 0 || bw_b <= 0) {
        throw std::invalid_argument(
            "select bucket: image " + size_str(width, height) + " is too elongated for " +
            "resolution " + size_str(options_.resolution_w, options_.resolution_h) +
            " and bucket_reso_steps " + std::to_string(steps) + " (a bucket side would be 0)");
      }
      const double ar_a = static_cast<double>(bw) / bh_a;
      const double ar_b = static_cast<double>(bw_b) / bh;
      if (std::fabs(ar_a - aspect_ratio) < std::fabs(ar_b - aspect_ratio)) {
        sel.resized_width = bw;
        sel.resized_height = static_cast<int>(bw / aspect_ratio + 0.5);
      } else {
        sel.resized_width = static_cast<int>(bh * aspect_ratio + 0.5);
        sel.resized_height = bh;
      }
    } else {
      sel.resized_width = width;
      sel.resized_height = height;
    }
    sel.bucket = {sel.resized_width - sel.resized_width % steps,
                  sel.resized_height - sel.resized_height % steps};
    if (static_cast<std::int64_t>(width) * height > max_area) {
      grow_no_upscale_bucket(width, height, max_area, steps, &sel);
    }
  }
  if (sel.bucket.width <= 0 || sel.bucket.height <= 0 || sel.resized_width <= 0 ||
      sel.resized_height <= 0) {
    throw std::invalid_argument(
        "select bucket: image " + size_str(width, height) + " gives bucket " +
        size_str(sel.bucket.width, sel.bucket.height) + " (resized " +
        size_str(sel.resized_width, sel.resized_height) +
        "); expected both sides > 0 (is the image smaller than bucket_reso_steps " +
        std::to_string(options_.bucket_reso_steps) + "?)");
  }
  sel.ar_error = static_cast<double>(sel.bucket.width) / sel.bucket.height - aspect_ratio;
  return sel;
}

}  // namespace lf
