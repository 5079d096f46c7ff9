// kohya's "key=value" arguments (optimizer_args, lr_scheduler_args, network_args): kohya splits
// each at its first '=' and reads the value with Python's ast.literal_eval. These read the
// literals those arguments use: numbers (and float('inf')), True / False, None, quoted
// strings and tuples of numbers ("0.9,0.99" or "(0.9, 0.99)").
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lf {

// `text` without leading and trailing spaces and tabs.
std::string trim_blanks(const std::string& text);

// A finite number in Python's float syntax ("1e-4", "0.5", "3"); std::nullopt otherwise.
std::optional<double> parse_number(const std::string& text);

// A Python string literal ('x' or "x") without its quotes; anything else trimmed, as it is.
std::string unquoted(const std::string& value);

struct KohyaArg {
  std::string key;    // trimmed
  std::string value;  // trimmed, the literal's text
};
// Splits "key=value" at the first '='; std::nullopt without one or with an empty key.
std::optional<KohyaArg> split_kohya_arg(const std::string& arg);

struct PyLiteral {
  enum class Kind { Number, Bool, None, String, Numbers };
  Kind kind = Kind::None;
  // Number: one value; Bool: 1 or 0; Numbers: the tuple's elements.
  std::vector<double> numbers;
  std::string text;  // String: the unquoted text
};
// ast.literal_eval of the literals above; a bare word is a String (as kohya users write
// lr_scheduler_args warmup_type=cosine). std::nullopt for an empty value or a malformed tuple.
std::optional<PyLiteral> parse_py_literal(const std::string& value);

}  // namespace lf
