// Image decoding and the resize-to-cover + centre-crop of kohya trim_and_resize_if_required.
// Pixels are 8-bit RGB, HWC, row-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/data/bucket_manager.h"

namespace lf {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> pixels;  // width*height*3, RGB
};

// Decodes any format OpenCV reads (IMREAD_UNCHANGED, so EXIF orientation is ignored as in
// kohya's PIL load); 16-bit is scaled by 1/257, grey becomes RGB, alpha is composited on white
// (kohya's PIL convert("RGB") drops alpha instead). Throws DatasetError("<path>: cannot decode
// image ...") when the file is missing, empty, truncated or not an image.
RgbImage load_rgb_image(const std::string& path);

// Resizes to (sel.resized_width, sel.resized_height) (INTER_AREA when neither side grows, else
// cv::INTER_LANCZOS4 where kohya uses PIL LANCZOS) and centre-crops to sel.bucket (offset
// (size - bucket) / 2, width then height). Throws std::invalid_argument when the resized size
// does not cover the bucket or the pixel buffer does not match width*height*3.
RgbImage resize_and_center_crop(const RgbImage& image, const BucketSelection& sel);

}  // namespace lf
