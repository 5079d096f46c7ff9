#include "common/image/png_encode.h"

#include <png.h>

#include <cstring>
#include <stdexcept>

namespace lf {
namespace {

void on_error(png_structp png, png_const_charp message) {
  throw std::runtime_error(std::string("libpng: ") + message);
  (void)png;
}
void on_warning(png_structp, png_const_charp) {}

void append(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::string*>(png_get_io_ptr(png));
  out->append(reinterpret_cast<const char*>(data), n);
}

struct Reader {
  const std::string& bytes;
  std::size_t pos = 0;
};

void read_bytes(png_structp png, png_bytep data, png_size_t n) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (r->pos + n > r->bytes.size()) png_error(png, "truncated PNG");
  std::memcpy(data, r->bytes.data() + r->pos, n);
  r->pos += n;
}

}  // namespace

std::string encode_png_rgb(const std::vector<std::uint8_t>& rgb, int width, int height,
                           const std::vector<std::pair<std::string, std::string>>& text) {
  if (width <= 0 || height <= 0 ||
      rgb.size() != static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3) {
    throw std::runtime_error("encode_png_rgb: the buffer is not width x height x 3 bytes");
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    throw std::runtime_error("libpng: out of memory");
  }
  std::string out;
  try {
    png_set_write_fn(png, &out, append, nullptr);
    png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
                 PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    std::vector<png_text> chunks(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      chunks[i] = png_text{};
      chunks[i].compression = PNG_ITXT_COMPRESSION_NONE;
      chunks[i].key = const_cast<char*>(text[i].first.c_str());
      chunks[i].text = const_cast<char*>(text[i].second.c_str());
      chunks[i].itxt_length = text[i].second.size();
    }
    if (!chunks.empty()) png_set_text(png, info, chunks.data(), static_cast<int>(chunks.size()));
    png_write_info(png, info);
    for (int y = 0; y < height; ++y) {
      png_write_row(png,
                    const_cast<png_bytep>(rgb.data() + static_cast<std::size_t>(y) * width * 3));
    }
    png_write_end(png, nullptr);
  } catch (...) {
    png_destroy_write_struct(&png, &info);
    throw;
  }
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<std::pair<std::string, std::string>> png_text_chunks(const std::string& bytes,
                                                                 const std::string& what) {
  if (bytes.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes.data()), 0, 8)) {
    throw std::runtime_error(what + ": not a PNG file");
  }
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    throw std::runtime_error("libpng: out of memory");
  }
  std::vector<std::pair<std::string, std::string>> out;
  Reader reader{bytes};
  try {
    png_set_read_fn(png, &reader, read_bytes);
    png_read_info(png, info);
    png_textp text = nullptr;
    const int n = png_get_text(png, info, &text, nullptr);
    for (int i = 0; i < n; ++i) {
      const std::size_t length = text[i].compression >= PNG_ITXT_COMPRESSION_NONE
                                     ? text[i].itxt_length
                                     : text[i].text_length;
      out.emplace_back(text[i].key, std::string(text[i].text, length));
    }
  } catch (const std::runtime_error& e) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw std::runtime_error(what + ": " + e.what());
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return out;
}

}  // namespace lf
