#include "worker/tensorboard/record_file.h"

#include <boost/crc.hpp>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace lf {
namespace {

using Crc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

constexpr std::size_t kHeaderBytes = 8 + 4;  // length, its CRC
constexpr std::size_t kFooterBytes = 4;      // the data's CRC

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t n) {
  Crc32c crc;
  crc.process_bytes(data, n);
  return crc.checksum();
}

std::uint32_t masked_crc32c(const void* data, std::size_t n) {
  const std::uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string frame_record(const std::string& data) {
  std::string out;
  out.reserve(kHeaderBytes + data.size() + kFooterBytes);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

RecordFileContents read_record_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read TensorBoard event file " + path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  RecordFileContents out;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const auto bad = [&](const std::string& what) {
      return std::runtime_error(path + ": byte " + std::to_string(pos) + ": " + what +
                                " (not a TensorBoard event file, or corrupted)");
    };
    if (bytes.size() - pos < kHeaderBytes) {
      out.torn_tail = true;
      break;
    }
    const char* p = bytes.data() + pos;
    if (static_cast<std::uint32_t>(get_le(p + 8, 4)) != masked_crc32c(p, 8)) {
      throw bad("record length CRC mismatch");
    }
    const std::uint64_t length = get_le(p, 8);
    if (length > bytes.size() - pos - kHeaderBytes ||
        bytes.size() - pos - kHeaderBytes - length < kFooterBytes) {
      out.torn_tail = true;
      break;
    }
    const char* data = p + kHeaderBytes;
    if (static_cast<std::uint32_t>(get_le(data + length, 4)) != masked_crc32c(data, length)) {
      throw bad("record data CRC mismatch");
    }
    out.records.emplace_back(data, length);
    pos += kHeaderBytes + length + kFooterBytes;
  }
  return out;
}

}  // namespace lf
