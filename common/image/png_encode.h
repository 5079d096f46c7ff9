// PNG files with text chunks, through libpng: sample images carry their prompt and settings in a
// tEXt/iTXt "parameters" chunk, the key and format A1111 / Forge write ("<prompt>\nNegative
// prompt: ...\nSteps: 30, Sampler: ..., CFG scale: 7.5, Seed: 1, Size: 512x512"), so that
// image viewers and web UIs show them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lf {

// An 8-bit RGB image (row-major, 3 bytes a pixel, width x height) encoded as PNG with the
// given (key, text) chunks, stored as UTF-8 iTXt. Throws std::runtime_error when libpng fails
// or the buffer's size is not width x height x 3.
std::string encode_png_rgb(const std::vector<std::uint8_t>& rgb, int width, int height,
                           const std::vector<std::pair<std::string, std::string>>& text);

// The text chunks of a PNG (tEXt, zTXt and iTXt), in file order; for tests and tools. Throws
// std::runtime_error naming `what` when the bytes are not a PNG.
std::vector<std::pair<std::string, std::string>> png_text_chunks(const std::string& png,
                                                                 const std::string& what);

}  // namespace lf
