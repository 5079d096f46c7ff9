// Python literals of kohya's "key=value" arguments (see header).
#include "common/config/python_literal.h"

#include <cmath>
#include <locale>
#include <sstream>

namespace lf {

std::string trim_blanks(const std::string& text) {
  const auto b = text.find_first_not_of(" \t");
  const auto e = text.find_last_not_of(" \t");
  return b == std::string::npos ? "" : text.substr(b, e - b + 1);
}

std::optional<double> parse_number(const std::string& text) {
  const std::string t = trim_blanks(text);
  std::istringstream in(t);
  in.imbue(std::locale::classic());
  double d = 0;
  if (!(in >> d) || !(in >> std::ws).eof() || !std::isfinite(d)) return std::nullopt;
  return d;
}

std::string unquoted(const std::string& value) {
  const std::string v = trim_blanks(value);
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) {
    return v.substr(1, v.size() - 2);
  }
  return v;
}

std::optional<KohyaArg> split_kohya_arg(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos) return std::nullopt;
  KohyaArg out{trim_blanks(arg.substr(0, eq)), trim_blanks(arg.substr(eq + 1))};
  if (out.key.empty()) return std::nullopt;
  return out;
}

std::optional<PyLiteral> parse_py_literal(const std::string& value) {
  std::string v = trim_blanks(value);
  if (v.empty()) return std::nullopt;
  PyLiteral out;
  if (v == "True" || v == "False") {
    out.kind = PyLiteral::Kind::Bool;
    out.numbers = {v == "True" ? 1.0 : 0.0};
    return out;
  }
  if (v == "None") return out;
  if (const auto d = parse_number(v)) {
    out.kind = PyLiteral::Kind::Number;
    out.numbers = {*d};
    return out;
  }
  if (v == "float('inf')" || v == "float(\"inf\")" || v == "math.inf") {
    out.kind = PyLiteral::Kind::Number;  // growth_rate's default, written out
    out.numbers = {INFINITY};
    return out;
  }
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) {
    out.kind = PyLiteral::Kind::String;
    out.text = unquoted(v);
    return out;
  }
  // A tuple "(a, b)" or a list "[a, b]" (kohya's literal_eval takes either), or "a,b".
  const bool parenthesized =
      (v.front() == '(' && v.back() == ')') || (v.front() == '[' && v.back() == ']');
  if (parenthesized || v.find(',') != std::string::npos) {
    if (parenthesized) v = v.substr(1, v.size() - 2);
    out.kind = PyLiteral::Kind::Numbers;
    std::stringstream in(v);
    for (std::string part; std::getline(in, part, ',');) {
      if (trim_blanks(part).empty()) continue;  // "(0.9,)": Python's one-element tuple
      const auto d = parse_number(part);
      if (!d) return std::nullopt;
      out.numbers.push_back(*d);
    }
    if (out.numbers.empty()) return std::nullopt;
    return out;
  }
  out.kind = PyLiteral::Kind::String;
  out.text = unquoted(v);
  return out;
}

}  // namespace lf
