// Reader and writer for the safetensors format (huggingface/safetensors, Rust crate `safetensors`):
// [u64 LE header length N][N bytes JSON header][byte buffer]. No LibTorch dependency; the worker
// wraps the raw bytes into tensors. Validation and writer byte layout follow the reference crate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/io/sha256.h"

namespace lf {

// Element types by their safetensors header names. F8_* are accepted for reading (kohya/ComfyUI
// files may carry them); newer sub-byte/complex types (F4, F6_*, F8_E8M0, C64...) are rejected.
enum class DType {
  BOOL,
  U8,
  I8,
  I16,
  U16,
  I32,
  U32,
  I64,
  U64,
  F16,
  BF16,
  F32,
  F64,
  F8_E4M3,
  F8_E5M2
};

// Bytes per element (1 for BOOL and F8).
size_t dtype_size(DType dtype);
// Header name, e.g. "F32", "BF16", "BOOL".
std::string dtype_name(DType dtype);
// Inverse of dtype_name. Throws std::invalid_argument "unknown safetensors dtype '<name>'".
DType parse_dtype(const std::string& name);

// One header entry. begin/end are byte offsets relative to the start of the byte buffer
// (end is one past the last byte), as in the file.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // row-major; empty = 0-dim scalar (numel 1)
  uint64_t begin = 0;
  uint64_t end = 0;

  int64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

// A validated, read-only safetensors file, either memory-mapped or read into an owned buffer.
// Movable, cheap to move; the mapping lives as long as the object (and its moved-to copies).
class SafetensorsFile {
 public:
  // Opens and validates `path` exactly as the reference reader does: file >= 8 bytes,
  // N <= 100,000,000 and 8 + N <= file size, header is a UTF-8 JSON object starting with '{'
  // (right-padding with spaces allowed), no duplicate keys, every entry has dtype/shape/
  // data_offsets with a known dtype, END - BEGIN == numel * dtype_size without overflow,
  // entries sorted by offset are contiguous from 0 and end exactly at the end of the file,
  // "__metadata__" (optional, may be null) is a flat string->string map.
  // Throws std::runtime_error "<path>: cannot open (<strerror>)" or
  // "<path>: invalid safetensors: <what>".
  static SafetensorsFile open(const std::string& path, bool use_mmap = true);
  // Same validation over an in-memory image; `label` replaces the path in messages.
  static SafetensorsFile from_bytes(std::vector<uint8_t> bytes, const std::string& label);

  // Entries in file-offset order (ties, i.e. zero-size tensors, by end then name).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorInfo* find(const std::string& name) const;
  // Pointer to the entry's first byte inside the mapping/buffer; may be unaligned (other writers
  // need not pad the header). Valid while this object lives.
  const uint8_t* data(const TensorInfo& info) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

  // Offset of the byte buffer in the file (8 + N) and its size in bytes. The buffer is what
  // kohya's sshs_model_hash hashes.
  uint64_t data_offset() const { return data_offset_; }
  uint64_t data_size() const;
  const uint8_t* data_section() const;

 private:
  struct Storage;
  SafetensorsFile() = default;
  void parse();

  std::shared_ptr<const Storage> storage_;
  std::string path_;
  uint64_t data_offset_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Builds a safetensors image byte-compatible with the reference Rust writer (python
// `safetensors.torch.save` / `save_file`): tensors sorted by descending dtype rank in the crate's
// Dtype order (U64, I64, F64, F32, U32, I32, BF16, F16, U16, I16, F8_E4M3, F8_E5M2, I8, U8, BOOL),
// then by name (bytewise); header `{"__metadata__":{...},"name":{"dtype":..,"shape":[..],
// "data_offsets":[b,e]},...}` with no spaces, non-ASCII kept as UTF-8, padded with spaces to a
// multiple of 8. "__metadata__" is written only after set_metadata() (an empty map gives
// `"__metadata__":{}`, like python metadata={}; never calling it is python metadata=None).
// The reference writes metadata keys in Rust HashMap (random) order; this writes them sorted,
// which is one of the orders it can produce.
class SafetensorsWriter {
 public:
  // Copies nbytes from data. Throws std::invalid_argument naming the tensor if the name is empty,
  // "__metadata__" or already added, a dim is negative, or nbytes != numel * dtype_size.
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
           size_t nbytes);
  // As add(), but keeps only the pointer: `data` must stay valid and unchanged until the last
  // serialize / write_atomic / data_sha256 / image_bytes call. For writing large tensors
  // without a copy.
  void add_view(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                size_t nbytes);
  void set_metadata(std::map<std::string, std::string> metadata);
  size_t tensor_count() const { return entries_.size(); }

  // The padded JSON header (without the 8-byte length prefix).
  // Throws std::invalid_argument if a name or metadata string is not valid UTF-8.
  std::string header() const;
  // Complete file image.
  std::vector<uint8_t> serialize() const;
  // Streams the image (length prefix, header, each tensor from where it lies) through an
  // AtomicFileWriter: no file image is assembled in memory. Returns the written size and
  // SHA-256. Throws std::runtime_error naming the path.
  FileDigest write_atomic(const std::string& path) const;
  // SHA-256 of the data section (the tensors' bytes in file order, everything after the header):
  // kohya's `sshs_model_hash` (sd-scripts library/train_util.py `addnet_hash_safetensors`).
  // It does not depend on the metadata.
  std::string data_sha256() const;
  // Bytes [offset, offset + len) of the image serialize() would return, clipped to its end,
  // without building it (kohya's `addnet_hash_legacy` hashes 64 KiB at 1 MiB).
  std::vector<uint8_t> image_bytes(uint64_t offset, size_t len) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> owned;     // add(): the copy
    const uint8_t* view = nullptr;  // add_view(): the caller's bytes
    size_t nbytes = 0;
    const uint8_t* bytes() const { return view ? view : owned.data(); }
  };
  std::vector<const Entry*> ordered() const;
  // The file image: the 8-byte length prefix with the header (held here), then each tensor's
  // bytes where they lie.
  struct Image {
    std::string head;
    std::vector<std::pair<const uint8_t*, size_t>> tensors;
    uint64_t size = 0;
    // Calls f(const uint8_t*, size_t) for each piece in file order.
    template <typename F>
    void visit(F&& f) const {
      f(reinterpret_cast<const uint8_t*>(head.data()), head.size());
      for (const auto& [p, n] : tensors) f(p, n);
    }
  };
  Image image() const;

  std::vector<Entry> entries_;
  std::set<std::string> names_;
  std::map<std::string, std::string> metadata_;
  bool has_metadata_ = false;
};

}  // namespace lf
