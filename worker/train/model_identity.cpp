// Module identity (see header).
#include "worker/train/model_identity.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "common/io/sha256.h"

namespace lf {

std::string module_identity(const std::map<std::string, at::Tensor>& state_dict) {
  std::string manifest;
  for (const auto& [name, tensor] : state_dict) {
    if (!tensor.defined()) {
      throw std::invalid_argument("module_identity: state dict entry '" + name +
                                  "' is an undefined tensor");
    }
    const at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    manifest += std::to_string(name.size()) + ":" + name + "\n";
    manifest += std::string(c10::toString(t.scalar_type())) + "\n[";
    for (int64_t d = 0; d < t.dim(); ++d) {
      manifest += (d ? "," : "") + std::to_string(t.size(d));
    }
    manifest += "]\n" + sha256_hex(t.data_ptr(), t.nbytes()) + "\n";
  }
  return sha256_hex(manifest);
}

}  // namespace lf
