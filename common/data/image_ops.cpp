// Image decoding to 8-bit RGB with OpenCV and kohya's trim_and_resize_if_required
// (library/train_util.py): resize to cover the bucket, then centre-crop width, then height.
// OpenCV decodes BGR(A), 16-bit and grey; everything is normalised here to one RGB layout.
#include "common/data/image_ops.h"

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "common/data/dataset.h"

namespace lf {
namespace {

const char* const kExpected = "expected png/jpg/jpeg/webp/bmp";

std::string size_str(int w, int h) { return std::to_string(w) + "x" + std::to_string(h); }

RgbImage to_rgb_image(const cv::Mat& rgb) {
  RgbImage out;
  out.width = rgb.cols;
  out.height = rgb.rows;
  out.pixels.resize(static_cast<std::size_t>(rgb.cols) * rgb.rows * 3);
  const std::size_t row_bytes = static_cast<std::size_t>(rgb.cols) * 3;
  for (int y = 0; y < rgb.rows; ++y) {
    std::memcpy(out.pixels.data() + y * row_bytes, rgb.ptr<std::uint8_t>(y), row_bytes);
  }
  return out;
}

// Composites 8-bit grey+alpha or BGRA over white: c' = (c*a + 255*(255-a)) / 255, rounded.
cv::Mat composite_on_white(const cv::Mat& src) {
  const int colour_channels = src.channels() - 1;
  cv::Mat out(src.rows, src.cols, CV_8UC3);
  for (int y = 0; y < src.rows; ++y) {
    const std::uint8_t* s = src.ptr<std::uint8_t>(y);
    std::uint8_t* d = out.ptr<std::uint8_t>(y);
    for (int x = 0; x < src.cols; ++x, s += src.channels(), d += 3) {
      const int a = s[colour_channels];
      for (int c = 0; c < 3; ++c) {
        // Grey+alpha: one colour channel feeds all three; BGRA: swap to RGB on the way.
        const int v = colour_channels == 1 ? s[0] : s[2 - c];
        d[c] = static_cast<std::uint8_t>((v * a + 255 * (255 - a) + 127) / 255);
      }
    }
  }
  return out;
}

}  // namespace

RgbImage load_rgb_image(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw DatasetError(path + ": cannot decode image: no such file (" + kExpected + ")");
  }
  cv::Mat img;
  try {
    img = cv::imread(path, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    throw DatasetError(path + ": cannot decode image (" + kExpected + "): " + e.what());
  }
  if (img.empty() || img.cols <= 0 || img.rows <= 0) {
    throw DatasetError(path + ": cannot decode image (" + kExpected + ")");
  }
  if (img.depth() == CV_16U) {
    // 65535 -> 255 exactly (scale 1/257, rounded), rather than saturating everything above 255.
    cv::Mat eight;
    img.convertTo(eight, CV_8U, 1.0 / 257.0);
    img = eight;
  } else if (img.depth() != CV_8U) {
    throw DatasetError(path + ": cannot decode image: unsupported pixel depth (expected 8- or "
                       "16-bit channels)");
  }
  cv::Mat rgb;
  switch (img.channels()) {
    case 1: cv::cvtColor(img, rgb, cv::COLOR_GRAY2RGB); break;
    case 2: rgb = composite_on_white(img); break;
    case 3: cv::cvtColor(img, rgb, cv::COLOR_BGR2RGB); break;
    case 4: rgb = composite_on_white(img); break;
    default:
      throw DatasetError(path + ": cannot decode image: " + std::to_string(img.channels()) +
                         " channels (expected grey, RGB or RGBA)");
  }
  return to_rgb_image(rgb);
}

RgbImage resize_and_center_crop(const RgbImage& image, const BucketSelection& sel) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<std::size_t>(image.width) * image.height * 3) {
    throw std::invalid_argument("resize_and_center_crop: image " +
                                size_str(image.width, image.height) + " has " +
                                std::to_string(image.pixels.size()) +
                                " bytes; expected width*height*3");
  }
  if (sel.resized_width < sel.bucket.width || sel.resized_height < sel.bucket.height ||
      sel.bucket.width <= 0 || sel.bucket.height <= 0) {
    throw std::invalid_argument("resize_and_center_crop: resized size " +
                                size_str(sel.resized_width, sel.resized_height) +
                                " does not cover bucket " +
                                size_str(sel.bucket.width, sel.bucket.height));
  }
  // cv::Mat header over the const input; only read from.
  const cv::Mat src(image.height, image.width, CV_8UC3,
                    const_cast<std::uint8_t*>(image.pixels.data()));
  cv::Mat resized = src;
  if (image.width != sel.resized_width || image.height != sel.resized_height) {
    // kohya resize_image: area when neither side grows, otherwise Lanczos.
    const bool shrink = image.width >= sel.resized_width && image.height >= sel.resized_height;
    cv::resize(src, resized, cv::Size(sel.resized_width, sel.resized_height), 0, 0,
               shrink ? cv::INTER_AREA : cv::INTER_LANCZOS4);
  }
  const int left = (resized.cols - sel.bucket.width) / 2;
  const int top = (resized.rows - sel.bucket.height) / 2;
  return to_rgb_image(resized(cv::Rect(left, top, sel.bucket.width, sel.bucket.height)));
}

}  // namespace lf
