// Decoding one image file into the single pixel layout the rest of lorafleet uses: 8-bit RGB,
// upright (EXIF orientation applied), plus the alpha channel kept apart for kohya's alpha_mask.
//
// Policy (docs/dataset.md "Image formats"):
//   - formats: whatever OpenCV's imgcodecs reads (png, jpg/jpeg, webp, bmp are scanned);
//   - EXIF orientation 1..8 is applied, from JPEG APP1 (libexif) and PNG eXIf / WebP EXIF chunks;
//   - 16-bit channels are scaled to 8 bits (v * 255 / 65535, rounded), never clamped;
//   - grey, grey+alpha, palette (with or without tRNS transparency) and CMYK become RGB;
//   - with an alpha channel, `rgb` is the colour composited on white (c*a + 255*(255-a)) / 255
//     and `alpha` holds the alpha; without one, `alpha` is empty;
//   - images above max_pixels are refused before their pixels are decoded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lf {

struct DecodedImage {
  int width = 0;                     // pixels, after EXIF orientation
  int height = 0;
  std::vector<std::uint8_t> rgb;     // width*height*3, RGB, row-major (HWC)
  std::vector<std::uint8_t> rgb_straight;  // colour before compositing, only when alpha exists
  std::vector<std::uint8_t> alpha;   // width*height, 255 = opaque; empty when no alpha channel
  int exif_orientation = 1;          // 1..8 as found in the file (1 when absent)
  bool source_has_alpha = false;     // the file has alpha (set even when keep_alpha is false)
  // libpng's warnings about the file's colour profile, which is ignored (png_profile.h); the
  // scan reports them as one counted warning.
  std::vector<std::string> profile_warnings;
  bool has_alpha() const { return !alpha.empty(); }
};

struct DecodeOptions {
  // Refuse images with more pixels than this (width*height, as stored), before decoding them.
  // Default as Pillow's DecompressionBombError threshold (2 * 89478485).
  std::int64_t max_pixels = 178956970;
  bool keep_alpha = true;  // false: skip filling `alpha`/`rgb_straight` (saves memory)
};

// Decodes `bytes` (the whole file's contents). `path` only names the file in errors.
// Throws DatasetError("<path>: cannot decode image: <why> (expected ...)") for empty, truncated,
// non-image or unsupported files, and for images above max_pixels (naming WxH and the limit).
DecodedImage decode_image(const std::string& path, const std::vector<std::uint8_t>& bytes,
                          const DecodeOptions& options = {});

// Reads the file and decodes it. Throws DatasetError naming the path (also when unreadable).
DecodedImage decode_image_file(const std::string& path, const DecodeOptions& options = {});

// Reads a whole file into memory. Throws DatasetError("<path>: cannot read ...").
std::vector<std::uint8_t> read_file_bytes(const std::string& path);

}  // namespace lf
