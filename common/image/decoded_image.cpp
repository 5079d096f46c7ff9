// Decoding (see header). OpenCV imdecode with IMREAD_UNCHANGED keeps alpha and 16-bit samples
// and expands palette+tRNS PNGs to BGRA, but applies no EXIF orientation and reports truncated
// files only as an empty Mat; the size limit, the EXIF orientation (libexif) and the conversion
// to one RGB(+alpha) layout are done here.
#include "common/image/decoded_image.h"

#include <libexif/exif-data.h>
#include <libexif/exif-utils.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/data/dataset.h"
#include "common/image/image_header.h"
#include "common/image/png_profile.h"

namespace lf {
namespace {

const char* const kExpected = "expected a png, jpg/jpeg, webp or bmp image";

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw DatasetError(path + ": cannot decode image: " + why + " (" + kExpected + ")");
}

void check_pixels(const std::string& path, int w, int h, std::int64_t max_pixels) {
  const std::int64_t n = static_cast<std::int64_t>(w) * h;
  if (n > max_pixels) {
    throw DatasetError(path + ": cannot decode image: " + std::to_string(w) + "x" +
                       std::to_string(h) + " = " + std::to_string(n) +
                       " pixels is above the limit of " + std::to_string(max_pixels) +
                       " pixels (dataset.max_image_pixels; a decompression bomb or an oversized photo)");
  }
}

// Orientation tag (0x0112) of IFD0 from EXIF TIFF bytes; 1 when absent or outside 1..8, as
// Pillow's ImageOps.exif_transpose ignores unknown values.
int read_exif_orientation(const std::vector<std::uint8_t>& bytes, const ImageHeader& hdr) {
  static const std::uint8_t kPrefix[6] = {'E', 'x', 'i', 'f', 0, 0};
  // libexif's loader wants "Exif\0\0" before the TIFF header. JPEG APP1 has it in place; PNG
  // and WebP chunks hold bare TIFF bytes, which are copied behind a prefix (EXIF is small).
  std::vector<std::uint8_t> copy;
  const std::uint8_t* data = nullptr;
  if (hdr.exif_offset >= 6 && std::memcmp(bytes.data() + hdr.exif_offset - 6, kPrefix, 6) == 0) {
    data = bytes.data() + hdr.exif_offset - 6;
  } else {
    copy.reserve(hdr.exif_size + 6);
    copy.assign(kPrefix, kPrefix + 6);
    copy.insert(copy.end(), bytes.begin() + hdr.exif_offset,
                bytes.begin() + hdr.exif_offset + hdr.exif_size);
    data = copy.data();
  }
  ExifData* ed = exif_data_new();
  if (ed == nullptr) return 1;
  // Reading only: skip libexif's "fix to the specification" pass, which adds missing tags.
  exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  exif_data_load_data(ed, data, static_cast<unsigned int>(hdr.exif_size + 6));
  int orientation = 1;
  ExifEntry* e = exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
  if (e != nullptr && e->format == EXIF_FORMAT_SHORT && e->components >= 1 && e->size >= 2) {
    orientation = exif_get_short(e->data, exif_data_get_byte_order(ed));
  }
  exif_data_unref(ed);
  return orientation >= 1 && orientation <= 8 ? orientation : 1;
}

// Turns the stored pixels upright. Stored (x, y) in a WxH image goes to, per EXIF value:
// 2 (W-1-x, y) mirror; 3 (W-1-x, H-1-y) rotate 180; 4 (x, H-1-y) flip; 5 (y, x) transpose;
// 6 (H-1-y, x) rotate 90 clockwise; 7 (H-1-y, W-1-x) transverse; 8 (y, W-1-x) rotate 90
// counter-clockwise — Pillow's exif_transpose methods FLIP_LEFT_RIGHT, ROTATE_180,
// FLIP_TOP_BOTTOM, TRANSPOSE, ROTATE_270, TRANSVERSE, ROTATE_90.
cv::Mat apply_orientation(const cv::Mat& m, int orientation) {
  cv::Mat out;
  switch (orientation) {
    case 2: cv::flip(m, out, 1); break;
    case 3: cv::rotate(m, out, cv::ROTATE_180); break;
    case 4: cv::flip(m, out, 0); break;
    case 5: cv::transpose(m, out); break;
    case 6: cv::rotate(m, out, cv::ROTATE_90_CLOCKWISE); break;
    case 7: {
      cv::Mat t;
      cv::transpose(m, t);
      cv::flip(t, out, -1);
      break;
    }
    case 8: cv::rotate(m, out, cv::ROTATE_90_COUNTERCLOCKWISE); break;
    default: return m;
  }
  return out;
}

// BGRA or grey+alpha (8-bit) into RGB composited on white, c' = (c*a + 255*(255-a)) / 255
// rounded, and optionally the straight RGB and the alpha plane.
void split_alpha(const cv::Mat& src, DecodedImage& out, bool keep_alpha) {
  const int cn = src.channels();
  const std::size_t n = static_cast<std::size_t>(src.cols) * src.rows;
  out.rgb.resize(n * 3);
  if (keep_alpha) {
    out.rgb_straight.resize(n * 3);
    out.alpha.resize(n);
  }
  std::uint8_t* rgb = out.rgb.data();
  std::uint8_t* straight = out.rgb_straight.data();
  std::uint8_t* alpha = out.alpha.data();
  for (int y = 0; y < src.rows; ++y) {
    const std::uint8_t* s = src.ptr<std::uint8_t>(y);
    for (int x = 0; x < src.cols; ++x, s += cn, rgb += 3) {
      const int a = s[cn - 1];
      // Grey+alpha: one colour sample feeds all three; BGRA: swapped to RGB on the way.
      const int c[3] = {cn == 2 ? s[0] : s[2], cn == 2 ? s[0] : s[1], s[0]};
      for (int k = 0; k < 3; ++k) {
        rgb[k] = static_cast<std::uint8_t>((c[k] * a + 255 * (255 - a) + 127) / 255);
      }
      if (keep_alpha) {
        for (int k = 0; k < 3; ++k) *straight++ = static_cast<std::uint8_t>(c[k]);
        *alpha++ = static_cast<std::uint8_t>(a);
      }
    }
  }
}

}  // namespace

std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
  // The path's bytes go to the OS as they are (UTF-8 names work under any locale).
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw DatasetError(path + ": cannot read image file: no such file");
  if (!fs::is_regular_file(st)) {
    throw DatasetError(path + ": cannot read image file: not a regular file");
  }
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw DatasetError(path + ": cannot read image file: cannot open it");
  const std::streamoff size = f.tellg();
  if (size < 0) throw DatasetError(path + ": cannot read image file: cannot tell its size");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(bytes.data()), size);
  if (f.gcount() != size) {
    throw DatasetError(path + ": cannot read image file: read " + std::to_string(f.gcount()) +
                       " of " + std::to_string(size) + " bytes");
  }
  return bytes;
}

DecodedImage decode_image(const std::string& path, const std::vector<std::uint8_t>& bytes,
                          const DecodeOptions& options) {
  if (bytes.empty()) fail(path, "empty file");
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) fail(path, "file larger than 2 GiB");
  const ImageHeader hdr = read_image_header(bytes.data(), bytes.size());
  // Refused here, from the header alone, before any pixel buffer is allocated.
  if (hdr.has_size()) check_pixels(path, hdr.width, hdr.height, options.max_pixels);

  if (hdr.truncated) fail(path, "truncated or corrupt " + hdr.format + " data (no end marker)");

  // A colour profile libpng warns about is dropped before OpenCV sees it (its pixels are the
  // same), so that the warning is counted by the scan instead of printed per decode.
  std::vector<std::string> profile_warnings = png_profile_warnings(bytes);
  const std::vector<std::uint8_t> stripped =
      profile_warnings.empty() ? std::vector<std::uint8_t>{} : without_png_profile(bytes);
  const std::vector<std::uint8_t>& data = profile_warnings.empty() ? bytes : stripped;
  cv::Mat raw;
  try {
    const cv::Mat encoded(1, static_cast<int>(data.size()), CV_8U,
                          const_cast<std::uint8_t*>(data.data()));
    raw = cv::imdecode(encoded, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    fail(path, std::string("OpenCV: ") + e.what());
  }
  if (raw.empty()) {
    fail(path, hdr.format.empty() ? "unknown format or not an image"
                                  : "truncated or corrupt " + hdr.format + " data");
  }
  // Formats whose header is not parsed (TIFF, ...) are checked after decoding; OpenCV's own
  // OPENCV_IO_MAX_IMAGE_PIXELS (2^30) bounds them before.
  if (!hdr.has_size()) check_pixels(path, raw.cols, raw.rows, options.max_pixels);

  if (raw.depth() == CV_16U) {
    // v * 255 / 65535 = v / 257, rounded by convertTo (no ties: v/257 is never k + 0.5).
    cv::Mat eight;
    raw.convertTo(eight, CV_8U, 255.0 / 65535.0);
    raw = eight;
  } else if (raw.depth() != CV_8U) {
    fail(path, "unsupported sample type (depth " + std::to_string(raw.depth()) +
                   "; expected 8- or 16-bit unsigned channels)");
  }

  DecodedImage out;
  out.profile_warnings = std::move(profile_warnings);
  out.exif_orientation = hdr.exif_size > 0 ? read_exif_orientation(bytes, hdr) : 1;
  const cv::Mat img = apply_orientation(raw, out.exif_orientation);
  out.width = img.cols;
  out.height = img.rows;
  switch (img.channels()) {
    case 1:
    case 3: {
      out.rgb.resize(static_cast<std::size_t>(img.cols) * img.rows * 3);
      cv::Mat dst(img.rows, img.cols, CV_8UC3, out.rgb.data());  // writes into out.rgb
      cv::cvtColor(img, dst, img.channels() == 1 ? cv::COLOR_GRAY2RGB : cv::COLOR_BGR2RGB);
      break;
    }
    case 2:
    case 4:
      out.source_has_alpha = true;
      split_alpha(img, out, options.keep_alpha);
      break;
    default:
      fail(path, std::to_string(img.channels()) + " channels (expected grey, RGB or RGBA)");
  }
  return out;
}

DecodedImage decode_image_file(const std::string& path, const DecodeOptions& options) {
  return decode_image(path, read_file_bytes(path), options);
}

}  // namespace lf
