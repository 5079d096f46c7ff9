// The image header sniffers (PNG, JPEG, WebP, BMP) over arbitrary bytes: never throw, and an
// EXIF block they report lies inside the bytes given.
#include "common/image/image_header.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const lf::ImageHeader h = lf::read_image_header(data, size);
  lf::fuzz::require(h.exif_offset <= size && h.exif_size <= size - h.exif_offset,
                    "the EXIF block lies inside the file");
  lf::fuzz::require(h.width >= 0 && h.height >= 0, "sizes are not negative");
  return 0;
}
