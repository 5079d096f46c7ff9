// output_timestamp (see header).
#include "common/util/wall_clock.h"

#include <cstdlib>

namespace lf {

std::time_t output_timestamp() {
  if (const char* v = std::getenv("SOURCE_DATE_EPOCH")) {
    char* end = nullptr;
    const long long t = std::strtoll(v, &end, 10);
    if (end != v && *end == '\0' && t >= 0) return static_cast<std::time_t>(t);
  }
  return std::time(nullptr);
}

}  // namespace lf
