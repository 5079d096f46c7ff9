// What an image file's container says before any pixel is decoded: the stored width and height
// (PNG IHDR, JPEG SOFn, WebP VP8/VP8L/VP8X, BMP info header) and where its EXIF block is
// (JPEG APP1 "Exif\0\0", PNG eXIf chunk, WebP EXIF chunk). Read by decode_image to refuse
// oversized images before decoding (as Pillow's DecompressionBombError check on Image.open)
// and to find the EXIF orientation that OpenCV's IMREAD_UNCHANGED ignores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lf {

struct ImageHeader {
  std::string format;  // "png", "jpeg", "webp", "bmp"; empty when the signature is unknown
  int width = 0;       // stored size in pixels (before EXIF orientation); 0 when not found
  int height = 0;
  // The EXIF block as TIFF bytes ("II*\0" / "MM\0*" ...), an offset into the bytes given;
  // exif_size 0 when the file has none. A leading "Exif\0\0" (JPEG APP1, some WebP writers) is
  // not included.
  std::size_t exif_offset = 0;
  std::size_t exif_size = 0;
  // JPEG only: SOS was reached but no EOI marker follows the scan data. OpenCV 4.6 decodes such
  // a file without error, filling the missing rows with grey (libjpeg's "premature end" is only
  // a warning); Pillow refuses it ("image file is truncated"), and so does decode_image.
  bool truncated = false;
  bool has_size() const { return width > 0 && height > 0; }
};

// Walks the container structure only (segment/chunk headers; nothing is decompressed). Never
// throws: a truncated or malformed structure just leaves the fields it could not reach at their
// defaults, so the decoder gets to report the real error. Formats other than those above (TIFF,
// ...) give an empty `format`.
ImageHeader read_image_header(const std::uint8_t* data, std::size_t size);

}  // namespace lf
