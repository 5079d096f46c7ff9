// Registry::Serialize (see registry.h).
#include "common/metrics/registry.h"

namespace lf {
namespace metrics {

std::string Registry::Serialize() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& f : families_) f->Serialize(out);
  return out;
}

}  // namespace metrics
}  // namespace lf
