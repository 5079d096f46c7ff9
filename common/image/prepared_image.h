// The training view of one image: resized to cover its bucket, cropped to the bucket and
// optionally flipped, as kohya sd-scripts trim_and_resize_if_required (library/train_util.py)
// followed by flip_aug. Which crop and flip a sample gets is decided by the epoch plan.
#pragma once

#include <cstdint>
#include <vector>

#include "common/data/bucket_manager.h"
#include "common/image/decoded_image.h"

namespace lf {

// Crop and flip of one sample, in pixels of the resized image. crop_left/top = -1 means centre
// ((resized - bucket) / 2, as kohya without random_crop).
struct CropFlip {
  int crop_left = -1;
  int crop_top = -1;
  bool flip = false;  // horizontal, after cropping
  bool operator==(const CropFlip& o) const {
    return crop_left == o.crop_left && crop_top == o.crop_top && flip == o.flip;
  }
};

struct PreparedImage {
  int width = 0;   // == bucket width
  int height = 0;  // == bucket height
  std::vector<std::uint8_t> rgb;    // width*height*3 RGB HWC
  std::vector<std::uint8_t> alpha;  // width*height when use_alpha and the image has alpha
  int crop_left = 0;  // the crop actually applied (centre resolved)
  int crop_top = 0;
};

// Resizes `image` to (sel.resized_width, sel.resized_height) — cv::INTER_AREA when neither side
// grows, else cv::INTER_LANCZOS4 where kohya uses PIL LANCZOS — then crops to sel.bucket at
// `cf` (centre when -1) and flips when cf.flip. use_alpha (kohya alpha_mask): the colour is the
// straight (not composited) RGB and `alpha` is filled (255 when the image has none).
// Throws std::invalid_argument when the resized size does not cover the bucket, a crop offset
// is outside [0, resized - bucket], or the pixel buffers do not match the size.
PreparedImage prepare_image(const DecodedImage& image, const BucketSelection& sel,
                            const CropFlip& cf, bool use_alpha);

}  // namespace lf
