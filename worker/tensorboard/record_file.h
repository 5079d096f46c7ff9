// The record framing of TensorBoard event files, TFRecord's (tensorflow/core/lib/io/
// record_writer.cc): each record is
//   uint64 length (little endian) | uint32 masked CRC32C of those 8 bytes | data |
//   uint32 masked CRC32C of data
// with the CRC32C (Castagnoli) computed by Boost.CRC and masked as TensorFlow's crc32c::Mask.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lf {

// CRC-32C (polynomial 0x1EDC6F41, reflected, init and final xor 0xFFFFFFFF) of n bytes;
// crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(const void* data, std::size_t n);
// TensorFlow's masked form: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(const void* data, std::size_t n);

// One framed record holding `data`.
std::string frame_record(const std::string& data);

struct RecordFileContents {
  std::vector<std::string> records;  // the data of every whole record, in file order
  bool torn_tail = false;            // the file ends inside a record (a writer was killed)
};

// Reads every record of an event file. A last record cut short (the writer died mid-write) is
// left out and reported as torn_tail. Throws std::runtime_error naming the file and byte offset
// when a record's length or data CRC does not match, or when the file cannot be read.
RecordFileContents read_record_file(const std::string& path);

}  // namespace lf
