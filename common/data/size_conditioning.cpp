// SDXL size / crop conditioning from a sample's real bucket, resize and crop.
#include "common/data/size_conditioning.h"

#include <stdexcept>
#include <string>

namespace lf {
namespace {

// Resolves a planned offset (-1 = centre) into [0, slack], as prepare_image does.
int resolve(int planned, int slack, const ImageRecord& image, const char* what) {
  if (slack < 0) {
    throw std::invalid_argument(image.path + ": resized size is smaller than its bucket");
  }
  const int off = planned < 0 ? slack / 2 : planned;
  if (off > slack) {
    throw std::invalid_argument(image.path + ": " + what + " " + std::to_string(off) +
                                " exceeds the resized image's slack " + std::to_string(slack));
  }
  return off;
}

}  // namespace

std::array<float, 6> sdxl_size_conditioning(const ImageRecord& image, const CropFlip& crop_flip) {
  const BucketSelection& sel = image.bucket;
  const int slack_w = sel.resized_width - sel.bucket.width;
  const int slack_h = sel.resized_height - sel.bucket.height;
  int left = resolve(crop_flip.crop_left, slack_w, image, "crop_left");
  const int top = resolve(crop_flip.crop_top, slack_h, image, "crop_top");
  if (crop_flip.flip) left = slack_w - left;  // resized_w - (left + bucket_w)
  return {static_cast<float>(image.height),      static_cast<float>(image.width),
          static_cast<float>(top),               static_cast<float>(left),
          static_cast<float>(sel.bucket.height), static_cast<float>(sel.bucket.width)};
}

}  // namespace lf
