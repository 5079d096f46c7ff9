// Python float formatting (see header).
#include "common/util/py_format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace lf {

// Python str()/repr() of a float: the shortest digits that round-trip, written positionally
// when the decimal exponent is in [-4, 16) ("1795993460.0", "0.0001") and as "1e-05" /
// "1.5e+16" otherwise, as CPython's float_repr does. kohya's metadata values are str(float).
std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  int prec = 1;  // significant digits of the shortest round-trip form
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // buf = "[-]d.ddde[+-]XX": split into sign, digits and exponent.
  std::string s = buf;
  const bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  const auto e = s.find('e');
  const int exponent = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, 1) + (e > 2 ? s.substr(2, e - 2) : "");
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      if (static_cast<int>(digits.size()) <= exponent + 1) {
        out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
      }
    } else {
      out = "0." + std::string(-exponent - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char ex[16];
    std::snprintf(ex, sizeof(ex), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += ex;
  }
  return negative ? "-" + out : out;
}

}  // namespace lf
