// Resize-to-cover, crop and flip (see header). Each plane (RGB, alpha) goes through the same
// steps, so a pixel's alpha stays aligned with its colour; the result is written straight into
// the output buffers (no intermediate copy when no crop or flip is needed).
#include "common/image/prepared_image.h"

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace lf {
namespace {

std::string size_str(int w, int h) { return std::to_string(w) + "x" + std::to_string(h); }

// kohya resize_image: "area" when neither side grows, otherwise Lanczos (PIL LANCZOS there;
// cv::INTER_LANCZOS4 here), then image[top:top+bh, left:left+bw], then np.fliplr.
void prepare_plane(const cv::Mat& src, const BucketSelection& sel, int left, int top, bool flip,
                   std::uint8_t* dst_data) {
  const int bw = sel.bucket.width;
  const int bh = sel.bucket.height;
  cv::Mat dst(bh, bw, src.type(), dst_data);  // a header over the output buffer
  cv::Mat resized = src;
  if (src.cols != sel.resized_width || src.rows != sel.resized_height) {
    const bool shrink = src.cols >= sel.resized_width && src.rows >= sel.resized_height;
    const int interp = shrink ? cv::INTER_AREA : cv::INTER_LANCZOS4;
    const cv::Size size(sel.resized_width, sel.resized_height);
    if (size == dst.size() && !flip) {
      cv::resize(src, dst, size, 0, 0, interp);  // resized == bucket: nothing to crop
      return;
    }
    cv::resize(src, resized, size, 0, 0, interp);
  }
  const cv::Mat roi = resized(cv::Rect(left, top, bw, bh));
  if (flip) {
    cv::flip(roi, dst, 1);
  } else {
    roi.copyTo(dst);
  }
}

int resolve_offset(const char* name, int requested, int max_offset) {
  const int v = requested == -1 ? max_offset / 2 : requested;
  if (v < 0 || v > max_offset) {
    throw std::invalid_argument(std::string("prepare_image: ") + name + " " +
                                std::to_string(requested) + " is outside [0, " +
                                std::to_string(max_offset) + "] (or -1 for centre)");
  }
  return v;
}

}  // namespace

PreparedImage prepare_image(const DecodedImage& image, const BucketSelection& sel,
                            const CropFlip& cf, bool use_alpha) {
  const std::size_t n = static_cast<std::size_t>(std::max(image.width, 0)) *
                        static_cast<std::size_t>(std::max(image.height, 0));
  if (image.width <= 0 || image.height <= 0 || image.rgb.size() != n * 3) {
    throw std::invalid_argument("prepare_image: image " + size_str(image.width, image.height) +
                                " has " + std::to_string(image.rgb.size()) +
                                " rgb bytes; expected width*height*3");
  }
  const bool with_alpha = use_alpha && image.has_alpha();
  if (with_alpha && (image.alpha.size() != n || image.rgb_straight.size() != n * 3)) {
    throw std::invalid_argument("prepare_image: image " + size_str(image.width, image.height) +
                                " has " + std::to_string(image.alpha.size()) + " alpha and " +
                                std::to_string(image.rgb_straight.size()) +
                                " rgb_straight bytes; expected width*height and width*height*3");
  }
  const BucketReso& b = sel.bucket;
  if (b.width <= 0 || b.height <= 0 || sel.resized_width < b.width ||
      sel.resized_height < b.height) {
    throw std::invalid_argument("prepare_image: resized size " +
                                size_str(sel.resized_width, sel.resized_height) +
                                " does not cover bucket " + size_str(b.width, b.height));
  }
  PreparedImage out;
  out.width = b.width;
  out.height = b.height;
  out.crop_left = resolve_offset("crop_left", cf.crop_left, sel.resized_width - b.width);
  out.crop_top = resolve_offset("crop_top", cf.crop_top, sel.resized_height - b.height);

  const std::size_t out_n = static_cast<std::size_t>(b.width) * b.height;
  out.rgb.resize(out_n * 3);
  // kohya alpha_mask loads RGBA and trains on the straight colour; otherwise the colour is the
  // one composited on white (DecodedImage::rgb).
  const std::vector<std::uint8_t>& colour = with_alpha ? image.rgb_straight : image.rgb;
  prepare_plane(cv::Mat(image.height, image.width, CV_8UC3, const_cast<std::uint8_t*>(colour.data())),
                sel, out.crop_left, out.crop_top, cf.flip, out.rgb.data());
  if (use_alpha) {
    out.alpha.resize(out_n);
    if (with_alpha) {
      prepare_plane(cv::Mat(image.height, image.width, CV_8UC1,
                            const_cast<std::uint8_t*>(image.alpha.data())),
                    sel, out.crop_left, out.crop_top, cf.flip, out.alpha.data());
    } else {
      std::fill(out.alpha.begin(), out.alpha.end(), std::uint8_t{255});  // no alpha: opaque
    }
  }
  return out;
}

}  // namespace lf
