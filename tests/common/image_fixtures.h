// Test-only builders of image files for the common/image tests: OpenCV-encoded PNG/JPEG/WebP/BMP
// bytes, a minimal EXIF TIFF block holding one Orientation tag (TIFF 6.0 IFD layout, EXIF 2.3
// tag 0x0112 SHORT), and its insertion as a JPEG APP1 segment, a PNG eXIf chunk or a WebP EXIF
// chunk (VP8X extended container, as the WebP container spec).
#pragma once

#include <array>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/common/fixtures.h"

namespace lf::test {

// Debian python3-skimage's sample images (scripts/install_deps.sh puts them there).
inline const std::string kPhotos =
    std::string(LF_SOURCE_DIR) + "/.deps/skimage/usr/lib/python3/dist-packages/skimage/data/";

// RGB of pixel (x, y) of a width-wide HWC RGB buffer.
using Px = std::array<int, 3>;
inline Px px(const std::vector<std::uint8_t>& buf, int width, int x, int y) {
  const std::size_t i = (static_cast<std::size_t>(y) * width + x) * 3;
  return {buf[i], buf[i + 1], buf[i + 2]};
}

using Bytes = std::vector<std::uint8_t>;

inline Bytes encode_image(const cv::Mat& bgr, const std::string& ext,
                          const std::vector<int>& params = {}) {
  Bytes out;
  if (!cv::imencode(ext, bgr, out, params)) throw std::runtime_error("imencode " + ext);
  return out;
}

inline void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("write_bytes: cannot write " + path);
}

inline Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// TIFF header + IFD0 with the single entry Orientation (0x0112, SHORT, count 1) = value.
inline Bytes exif_orientation_tiff(int value, bool big_endian = false) {
  Bytes t;
  auto u16 = [&](unsigned v) {
    if (big_endian) t.insert(t.end(), {std::uint8_t(v >> 8), std::uint8_t(v)});
    else t.insert(t.end(), {std::uint8_t(v), std::uint8_t(v >> 8)});
  };
  auto u32 = [&](std::uint32_t v) {
    if (big_endian) { u16(v >> 16); u16(v & 0xFFFF); } else { u16(v & 0xFFFF); u16(v >> 16); }
  };
  t.push_back(big_endian ? 'M' : 'I');
  t.push_back(big_endian ? 'M' : 'I');
  u16(42);
  u32(8);       // IFD0 right after the header
  u16(1);       // one entry
  u16(0x0112);  // Orientation
  u16(3);       // SHORT
  u32(1);
  u16(static_cast<unsigned>(value));  // value, left-justified in the 4-byte field
  u16(0);
  u32(0);  // no next IFD
  return t;
}

// The JPEG with an APP1 "Exif\0\0" + tiff segment right after SOI.
inline Bytes jpeg_with_exif(const Bytes& jpeg, const Bytes& tiff) {
  if (jpeg.size() < 2 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) throw std::runtime_error("not jpeg");
  const std::size_t len = 2 + 6 + tiff.size();
  const std::uint8_t head[12] = {0xFF, 0xD8, 0xFF, 0xE1, std::uint8_t(len >> 8),
                                 std::uint8_t(len & 0xFF), 'E', 'x', 'i', 'f', 0, 0};
  Bytes out;
  out.reserve(sizeof head + tiff.size() + jpeg.size());
  out.insert(out.end(), head, head + sizeof head);
  out.insert(out.end(), tiff.begin(), tiff.end());
  out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
  return out;
}

// The PNG with a chunk (CRC computed) inserted before its first IDAT.
inline Bytes png_with_chunk(const Bytes& png, const char* type, const Bytes& data) {
  std::size_t pos = 8;
  while (pos + 8 <= png.size() && std::memcmp(png.data() + pos + 4, "IDAT", 4) != 0) {
    const std::size_t len = (std::size_t(png[pos]) << 24) | (std::size_t(png[pos + 1]) << 16) |
                            (std::size_t(png[pos + 2]) << 8) | png[pos + 3];
    pos += 12 + len;
  }
  if (pos + 8 > png.size()) throw std::runtime_error("png_with_chunk: no IDAT");
  Bytes chunk;
  put_be32(chunk, static_cast<std::uint32_t>(data.size()));
  Bytes td(type, type + 4);
  td.insert(td.end(), data.begin(), data.end());
  chunk.insert(chunk.end(), td.begin(), td.end());
  put_be32(chunk, png_crc32(td.data(), td.size()));
  Bytes out(png.begin(), png.begin() + pos);
  out.insert(out.end(), chunk.begin(), chunk.end());
  out.insert(out.end(), png.begin() + pos, png.end());
  return out;
}

inline void put_le(Bytes& b, std::uint32_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(std::uint8_t(v >> (8 * i)));
}

// A simple-format WebP (RIFF WEBP + one VP8/VP8L chunk) rewrapped as extended format: VP8X
// (canvas w x h, flags = EXIF when exif is given) + the image chunk + an EXIF chunk.
inline Bytes webp_extended(const Bytes& simple, int w, int h, const Bytes& exif) {
  if (simple.size() < 20 || std::memcmp(simple.data(), "RIFF", 4) != 0) {
    throw std::runtime_error("webp_extended: not a RIFF WebP");
  }
  Bytes body = {'W', 'E', 'B', 'P', 'V', 'P', '8', 'X'};
  put_le(body, 10, 4);
  body.push_back(exif.empty() ? 0 : 0x08);
  put_le(body, 0, 3);
  put_le(body, static_cast<std::uint32_t>(w - 1), 3);
  put_le(body, static_cast<std::uint32_t>(h - 1), 3);
  body.insert(body.end(), simple.begin() + 12, simple.end());
  if (!exif.empty()) {
    body.insert(body.end(), {'E', 'X', 'I', 'F'});
    put_le(body, static_cast<std::uint32_t>(exif.size()), 4);
    body.insert(body.end(), exif.begin(), exif.end());
    if (exif.size() % 2) body.push_back(0);
  }
  Bytes out = {'R', 'I', 'F', 'F'};
  put_le(out, static_cast<std::uint32_t>(body.size()), 4);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

}  // namespace lf::test
