// SDXL size/crop conditioning from the real bucket, resize and crop of a sample.
#include "common/data/size_conditioning.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace lf {
namespace {

// A 1000x750 photo in bucket 576x448, resized to 597x448 (as sd-scripts' BucketManager
// resizes it for that bucket): 21 px of horizontal slack, none vertical.
ImageRecord photo() {
  ImageRecord r;
  r.path = "/data/10_x/photo.jpg";
  r.width = 1000;
  r.height = 750;
  r.bucket.bucket = {576, 448};
  r.bucket.resized_width = 597;
  r.bucket.resized_height = 448;
  return r;
}

TEST(SizeConditioning, CentreCropIsHalfTheSlack) {
  const auto c = sdxl_size_conditioning(photo(), CropFlip{});
  // {orig_h, orig_w, top, left, target_h, target_w}; kohya's letterbox formula would send
  // (8, 0) for the crop here, lorafleet the true offset of the centre window: 21 // 2 = 10.
  EXPECT_EQ(c, (std::array<float, 6>{750, 1000, 0, 10, 448, 576}));
}

TEST(SizeConditioning, RandomCropAndFlipMirrorTheWindow) {
  EXPECT_EQ(sdxl_size_conditioning(photo(), CropFlip{3, 0, false}),
            (std::array<float, 6>{750, 1000, 0, 3, 448, 576}));
  // Flipped, the same 576-wide window starts 597 - (3 + 576) = 18 px from the left.
  EXPECT_EQ(sdxl_size_conditioning(photo(), CropFlip{3, 0, true}),
            (std::array<float, 6>{750, 1000, 0, 18, 448, 576}));
  EXPECT_EQ(sdxl_size_conditioning(photo(), CropFlip{-1, -1, true}),
            (std::array<float, 6>{750, 1000, 0, 11, 448, 576}));
}

TEST(SizeConditioning, CropOutsideTheSlackIsRefused) {
  try {
    sdxl_size_conditioning(photo(), CropFlip{22, 0, false});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "/data/10_x/photo.jpg: crop_left 22 exceeds the resized image's slack 21");
  }
}

}  // namespace
}  // namespace lf
