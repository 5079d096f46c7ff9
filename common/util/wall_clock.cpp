// output_timestamp and kohya_local_timestamp (see header).
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

std::string kohya_local_timestamp(std::time_t t) {
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d%H%M%S", &tm);
  return buf;
}

}  // namespace lf
