// safetensors <-> at::Tensor. Data may be unaligned inside the mapping (other writers need not
// pad the header): converted tensors are copied out with memcpy before torch sees them, and
// zero-copy views (kKeepStoredDtype) are only made of naturally aligned entries.
#include "worker/io/tensor_file.h"

#include <ATen/ATen.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "common/io/pickle_sniff.h"
#include "common/io/safetensors.h"

namespace lf {
namespace {

at::ScalarType to_scalar_type(DType d, const std::string& path, const std::string& name) {
  switch (d) {
    case DType::BOOL: return at::kBool;
    case DType::U8: return at::kByte;
    case DType::I8: return at::kChar;
    case DType::I16: return at::kShort;
    case DType::I32: return at::kInt;
    case DType::I64: return at::kLong;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
    case DType::F32: return at::kFloat;
    case DType::F64: return at::kDouble;
    default:
      throw std::runtime_error(path + ": tensor '" + name + "' has dtype " + dtype_name(d) +
                               ", which lorafleet does not load");
  }
}

DType to_dtype(at::ScalarType t, const std::string& name) {
  switch (t) {
    case at::kBool: return DType::BOOL;
    case at::kByte: return DType::U8;
    case at::kInt: return DType::I32;
    case at::kLong: return DType::I64;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    case at::kFloat: return DType::F32;
    case at::kDouble: return DType::F64;
    default:
      throw std::invalid_argument("cannot save tensor '" + name + "' of dtype " +
                                  std::string(c10::toString(t)) + " to safetensors");
  }
}

}  // namespace

TensorsWriter make_tensors_writer(const std::map<std::string, at::Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  TensorsWriter w;
  w.viewed.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    w.writer.add_view(name, to_dtype(t.scalar_type(), name), shape, t.data_ptr(), t.nbytes());
    w.viewed.push_back(std::move(t));
  }
  w.writer.set_metadata(metadata);
  return w;
}

LoadedTensors load_safetensors(const std::string& path, bool use_mmap,
                               at::ScalarType float_dtype) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw std::runtime_error(path + ": no such file (expected a .safetensors file)");
  }
  if (looks_like_pickle(path)) {
    throw std::runtime_error(path +
                             ": this is a PyTorch pickle (.ckpt/.pt), which can run code when "
                             "loaded and is refused; convert it to .safetensors first");
  }
  // Shared so that zero-copy views keep the mapping alive after this function returns.
  auto file = std::make_shared<SafetensorsFile>(SafetensorsFile::open(path, use_mmap));
  const bool keep = float_dtype == kKeepStoredDtype;
  LoadedTensors out;
  out.metadata = file->metadata();
  out.tensors.reserve(file->tensors().size());
  for (const TensorInfo& info : file->tensors()) {
    const at::ScalarType st_type = to_scalar_type(info.dtype, path, info.name);
    const uint8_t* src = file->data(info);
    const auto elem = static_cast<uintptr_t>(dtype_size(info.dtype));
    at::Tensor t;
    if (keep && info.nbytes() > 0 && reinterpret_cast<uintptr_t>(src) % elem == 0) {
      // The mapping is read-only: consumers copy out of these views (load_state_dict does).
      t = at::from_blob(const_cast<uint8_t*>(src), info.shape, [file](void*) {},
                        at::TensorOptions().dtype(st_type));
    } else {
      t = at::empty(info.shape, at::TensorOptions().dtype(st_type));
      if (info.nbytes() > 0) std::memcpy(t.data_ptr(), src, info.nbytes());
      if (!keep && at::isFloatingType(st_type) && st_type != float_dtype) t = t.to(float_dtype);
    }
    out.tensors.emplace(info.name, std::move(t));
  }
  return out;
}

FileDigest save_safetensors(const std::string& path,
                            const std::map<std::string, at::Tensor>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  return make_tensors_writer(tensors, metadata).writer.write_atomic(path);
}

std::vector<std::uint8_t> serialize_safetensors(
    const std::map<std::string, at::Tensor>& tensors,
    const std::map<std::string, std::string>& metadata) {
  return make_tensors_writer(tensors, metadata).writer.serialize();
}

}  // namespace lf
