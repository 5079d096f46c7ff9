#include "common/image/png_profile.h"

#include <png.h>

#include <cstring>
#include <stdexcept>

namespace lf {
namespace {

constexpr std::size_t kSignature = 8;

bool is_png(const std::vector<std::uint8_t>& b) {
  return b.size() >= kSignature && png_sig_cmp(b.data(), 0, kSignature) == 0;
}

std::uint32_t be32(const std::uint8_t* p) {
  return (static_cast<std::uint32_t>(p[0]) << 24) | (static_cast<std::uint32_t>(p[1]) << 16) |
         (static_cast<std::uint32_t>(p[2]) << 8) | static_cast<std::uint32_t>(p[3]);
}

// Calls f(offset, total chunk bytes, type) for each whole chunk after the signature.
template <typename F>
void for_each_chunk(const std::vector<std::uint8_t>& b, const F& f) {
  std::size_t pos = kSignature;
  while (pos + 12 <= b.size()) {
    const std::size_t length = be32(&b[pos]);
    if (length > b.size() - pos - 12) return;
    const std::string type(reinterpret_cast<const char*>(&b[pos + 4]), 4);
    f(pos, length + 12, type);
    if (type == "IEND") return;
    pos += length + 12;
  }
}

bool has_profile(const std::vector<std::uint8_t>& b) {
  bool found = false;
  for_each_chunk(b, [&](std::size_t, std::size_t, const std::string& t) { found |= t == "iCCP"; });
  return found;
}

struct Capture {
  const std::vector<std::uint8_t>& bytes;
  std::size_t pos = 0;
  std::vector<std::string> warnings;
};

void on_warning(png_structp png, png_const_charp message) {
  static_cast<Capture*>(png_get_error_ptr(png))->warnings.emplace_back(message);
}
void on_error(png_structp png, png_const_charp message) {
  throw std::runtime_error(message);
  (void)png;
}
void read(png_structp png, png_bytep out, png_size_t n) {
  auto* c = static_cast<Capture*>(png_get_io_ptr(png));
  if (c->pos + n > c->bytes.size()) png_error(png, "truncated");
  std::memcpy(out, c->bytes.data() + c->pos, n);
  c->pos += n;
}

}  // namespace

std::vector<std::string> png_profile_warnings(const std::vector<std::uint8_t>& bytes) {
  if (!is_png(bytes) || !has_profile(bytes)) return {};
  Capture capture{bytes, 0, {}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &capture, on_error, on_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return {};
  }
  try {
    png_set_read_fn(png, &capture, read);
    png_read_info(png, info);  // the chunks before the image data, iCCP among them
  } catch (const std::runtime_error&) {
    // Malformed: decode_image reports it.
  }
  png_destroy_read_struct(&png, &info, nullptr);
  std::vector<std::string> out;
  for (const std::string& w : capture.warnings) {
    if (w.rfind("iCCP", 0) == 0) out.push_back(w);
  }
  return out;
}

std::vector<std::uint8_t> without_png_profile(const std::vector<std::uint8_t>& bytes) {
  if (!is_png(bytes)) return bytes;
  std::vector<std::uint8_t> out(bytes.begin(), bytes.begin() + kSignature);
  std::size_t end = kSignature;
  for_each_chunk(bytes, [&](std::size_t pos, std::size_t n, const std::string& type) {
    if (type != "iCCP") out.insert(out.end(), bytes.begin() + pos, bytes.begin() + pos + n);
    end = pos + n;
  });
  out.insert(out.end(), bytes.begin() + end, bytes.end());  // anything after IEND, as is
  return out;
}

}  // namespace lf
