// Bridge between safetensors files (common/io, no torch) and LibTorch tensors. This is the one
// loading path for real checkpoints and for the generated demo checkpoint alike.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/io/safetensors.h"
#include "common/io/sha256.h"

namespace lf {

struct LoadedTensors {
  std::unordered_map<std::string, at::Tensor> tensors;  // CPU, owned copies
  std::map<std::string, std::string> metadata;           // the file's __metadata__
};

// Pass as float_dtype to keep every tensor in its stored dtype.
inline constexpr at::ScalarType kKeepStoredDtype = at::ScalarType::Undefined;

// Reads every tensor of a .safetensors file. Floating tensors (F16, BF16, F32, F64) are
// converted to `float_dtype`; integer and bool tensors keep their type. With kKeepStoredDtype,
// aligned tensors are zero-copy read-only views of the mapping (use_mmap) or of the read buffer,
// which stay alive while any of them does: a multi-GB checkpoint is then never duplicated in
// memory, each tensor being converted only as it is copied into its parameter. Never write to
// such a tensor.
// Throws std::runtime_error naming the path when it is missing, is a PyTorch pickle (recognised
// by content, refused with a hint to convert it), or is not valid safetensors.
LoadedTensors load_safetensors(const std::string& path, bool use_mmap = true,
                               at::ScalarType float_dtype = at::kFloat);

// Writes tensors (moved to CPU, made contiguous) with metadata atomically (temp file, fsync,
// rename), streamed from the tensors' own memory: CPU-contiguous tensors are not copied.
// Returns the file's size and SHA-256, hashed as it was written. Supported dtypes:
// float32/16, bfloat16, float64, int64, int32, uint8, bool. Throws std::runtime_error naming
// the path on I/O errors, std::invalid_argument naming a tensor of another dtype.
FileDigest save_safetensors(const std::string& path,
                            const std::map<std::string, at::Tensor>& tensors,
                            const std::map<std::string, std::string>& metadata);

// A safetensors writer over views of `tensors` (moved to CPU and made contiguous only where they
// are not already), holding the tensors it views: nothing is copied until it writes. The
// tensors must not be modified in place while it is used.
struct TensorsWriter {
  std::vector<at::Tensor> viewed;
  SafetensorsWriter writer;
};
TensorsWriter make_tensors_writer(const std::map<std::string, at::Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata);

// Serialises the same way without writing (for hashing, tests).
std::vector<std::uint8_t> serialize_safetensors(
    const std::map<std::string, at::Tensor>& tensors,
    const std::map<std::string, std::string>& metadata);

}  // namespace lf
