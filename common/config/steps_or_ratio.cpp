// kohya's int_or_float step counts (see header).
#include "common/config/steps_or_ratio.h"

#include <cmath>
#include <sstream>

namespace lf {
namespace {

// The whole of `text` as a finite double, or std::nullopt.
std::optional<double> number(const std::string& text) {
  std::istringstream in(text);
  in.imbue(std::locale::classic());
  double d = 0;
  if (!(in >> d) || !(in >> std::ws).eof() || !std::isfinite(d)) return std::nullopt;
  return d;
}

}  // namespace

std::int64_t StepsOrRatio::resolve(std::int64_t total_steps) const {
  if (!ratio) return steps;
  return static_cast<std::int64_t>(*ratio * static_cast<double>(total_steps));  // int(): floor
}

std::string StepsOrRatio::text() const {
  if (!ratio) return std::to_string(steps);
  // The shortest text that reads back as the same double, as Python's str() (0.123456789).
  for (int digits = 1;; ++digits) {
    std::ostringstream os;
    os.imbue(std::locale::classic());
    os.precision(digits);
    os << *ratio;
    if (digits >= 17 || std::stod(os.str()) == *ratio) return os.str();
  }
}

std::optional<StepsOrRatio> parse_steps_or_ratio(const std::string& text) {
  StepsOrRatio out;
  if (!text.empty() && text.back() == '%') {
    const std::optional<double> percent = number(text.substr(0, text.size() - 1));
    if (!percent || *percent < 0 || *percent >= 100) return std::nullopt;
    out.ratio = *percent / 100.0;
    return out;
  }
  const std::optional<double> d = number(text);
  if (!d || *d < 0) return std::nullopt;
  if (*d < 1) {
    out.ratio = *d;
    return out;
  }
  if (*d != std::floor(*d) || text.find_first_of(".eE") != std::string::npos) return std::nullopt;
  out.steps = static_cast<std::int64_t>(*d);
  return out;
}

}  // namespace lf
