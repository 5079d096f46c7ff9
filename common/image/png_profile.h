// PNG colour profiles (iCCP chunks) that libpng warns about ("iCCP: known incorrect sRGB
// profile", "invalid rendering intent", ...). OpenCV's PNG decoder lets libpng print those
// warnings to stderr, once per decode, on every rank; lorafleet ignores colour profiles as
// OpenCV and kohya do, so it reads the warnings here instead (libpng with a capturing warning
// handler, header chunks only) and decodes a copy without the iCCP chunk, whose pixels are the
// same. The dataset scan then reports them as one counted warning naming the files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lf {

// libpng's warnings about the iCCP chunk(s) of the PNG file in `bytes` (empty for non-PNG data,
// PNGs without an iCCP chunk and profiles libpng accepts). Never throws for malformed data: the
// decoder reports that.
std::vector<std::string> png_profile_warnings(const std::vector<std::uint8_t>& bytes);

// `bytes` with every iCCP chunk removed (the other chunks byte for byte).
std::vector<std::uint8_t> without_png_profile(const std::vector<std::uint8_t>& bytes);

}  // namespace lf
