// Test-only fixtures for the data-layer tests: a scratch folder removed at scope exit, and a
// PNG writer (stored deflate, filter 0) for exact images the photos in .deps lack: colour with
// partial alpha, 16-bit, grey+alpha, tiny odd sizes. CRC-32 / Adler-32 as RFC 2083 / RFC 1950.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace lf::test {

// A fresh folder under the system temp dir, unique per process and name; removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("lf_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str(const std::string& rel = "") const { return (path_ / rel).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("write_text: cannot write " + path.string());
}

inline std::uint32_t png_crc32(const std::uint8_t* data, std::size_t n, std::uint32_t crc = 0) {
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline void put_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
}

// color_type: 0 grey, 2 RGB, 4 grey+alpha, 6 RGBA; bit_depth 8 or 16. `samples` holds
// height*width*channels values (big-endian written for 16-bit).
inline void write_png(const std::string& path, int width, int height, int color_type,
                      int bit_depth, const std::vector<std::uint16_t>& samples) {
  const int channels = color_type == 0 ? 1 : color_type == 2 ? 3 : color_type == 4 ? 2 : 4;
  const std::size_t row_samples = static_cast<std::size_t>(width) * channels;
  if (samples.size() != row_samples * height) throw std::invalid_argument("write_png: size");
  std::vector<std::uint8_t> raw;  // filter byte 0 + row bytes
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);
    for (std::size_t i = 0; i < row_samples; ++i) {
      const std::uint16_t v = samples[y * row_samples + i];
      if (bit_depth == 16) raw.push_back(static_cast<std::uint8_t>(v >> 8));
      raw.push_back(static_cast<std::uint8_t>(v & 0xFF));
    }
  }
  std::vector<std::uint8_t> z = {0x78, 0x01};  // zlib header, stored blocks follow
  for (std::size_t pos = 0; pos < raw.size(); pos += 65535) {
    const std::size_t len = std::min<std::size_t>(65535, raw.size() - pos);
    z.push_back(pos + len >= raw.size() ? 1 : 0);
    z.push_back(len & 0xFF);
    z.push_back(len >> 8);
    z.push_back(~len & 0xFF);
    z.push_back((~len >> 8) & 0xFF);
    z.insert(z.end(), raw.begin() + pos, raw.begin() + pos + len);
  }
  std::uint32_t a = 1, b = 0;
  for (std::uint8_t c : raw) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  put_be32(z, (b << 16) | a);

  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  auto chunk = [&png](const char* type, const std::vector<std::uint8_t>& data) {
    put_be32(png, static_cast<std::uint32_t>(data.size()));
    std::vector<std::uint8_t> td(type, type + 4);
    td.insert(td.end(), data.begin(), data.end());
    png.insert(png.end(), td.begin(), td.end());
    put_be32(png, png_crc32(td.data(), td.size()));
  };
  std::vector<std::uint8_t> ihdr;
  put_be32(ihdr, width);
  put_be32(ihdr, height);
  ihdr.insert(ihdr.end(), {static_cast<std::uint8_t>(bit_depth),
                           static_cast<std::uint8_t>(color_type), 0, 0, 0});
  chunk("IHDR", ihdr);
  chunk("IDAT", z);
  chunk("IEND", {});
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  if (!f) throw std::runtime_error("write_png: cannot write " + path);
}

// An 8-bit RGB PNG whose pixel (x, y) is (x*7 + y) % 256, (y*5) % 256, (x + y*3) % 256.
inline void write_pattern_png(const std::string& path, int width, int height) {
  std::vector<std::uint16_t> s;
  s.reserve(static_cast<std::size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      s.push_back(static_cast<std::uint16_t>((x * 7 + y) % 256));
      s.push_back(static_cast<std::uint16_t>((y * 5) % 256));
      s.push_back(static_cast<std::uint16_t>((x + y * 3) % 256));
    }
  }
  write_png(path, width, height, 2, 8, s);
}

}  // namespace lf::test
