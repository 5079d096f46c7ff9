// Prometheus text format 0.0.4 primitives (see text_format.h).
#include "common/metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <system_error>

namespace lf {
namespace metrics {

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Shortest round-trip digits; plain notation for decimal exponents -4..20 (1234567, 0.0001),
  // scientific outside (1e+21, 2.5e-07), so integer-valued counters read as integers.
  char buf[400];
  auto sci = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  if (sci.ec != std::errc()) return "NaN";  // cannot happen: 400 bytes fit any double
  const std::string scientific(buf, sci.ptr);
  const int exponent = std::atoi(scientific.c_str() + scientific.find('e') + 1);
  if (value != 0 && (exponent < -4 || exponent > 20)) return scientific;
  auto fixed = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed);
  return std::string(buf, fixed.ptr);
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendSample(std::string& out, const std::string& name, const Labels& labels,
                  const std::string& value, const std::string& extra_name,
                  const std::string& extra_value) {
  out += name;
  if (!labels.empty() || !extra_name.empty()) {
    out += '{';
    bool first = true;
    for (const auto& kv : labels) {
      if (!first) out += ',';
      first = false;
      out += kv.first;
      out += "=\"";
      out += EscapeLabelValue(kv.second);
      out += '"';
    }
    if (!extra_name.empty()) {
      if (!first) out += ',';
      out += extra_name;
      out += "=\"";
      out += EscapeLabelValue(extra_value);
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  out += value;
  out += '\n';
}

namespace {
bool is_alpha_(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

bool IsValidMetricName(const std::string& name) {
  if (name.empty() || !(is_alpha_(name[0]) || name[0] == ':')) return false;
  for (char c : name) {
    if (!(is_alpha_(c) || is_digit(c) || c == ':')) return false;
  }
  return true;
}

bool IsValidLabelName(const std::string& name) {
  if (name.empty() || !is_alpha_(name[0])) return false;
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') return false;
  for (char c : name) {
    if (!(is_alpha_(c) || is_digit(c))) return false;
  }
  return true;
}

bool IsValidUtf8(const std::string& text) {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t extra;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= n) return false;
    for (size_t k = 1; k <= extra; ++k) {
      unsigned char cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

}  // namespace metrics
}  // namespace lf
