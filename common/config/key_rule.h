// The rule one job-config key's value must follow: a range for numbers, a set of values for
// strings, or "required". A rule renders what the value is expected to be, for the error message
// ("expected an integer >= 1, got 0") and for `lorafleet-coordinator --list-keys`. Rules that
// involve more than one key (kohya's preconditions) live in the parser's validation instead.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/config/steps_or_ratio.h"

namespace lf {

// What a key's C++ member holds; it names the value in messages ("an integer", "a number").
enum class KeyValueKind {
  kBool,
  kInteger,
  kNonNegativeInteger,
  kNumber,
  kString,
  kStepsOrRatio,  // steps_or_ratio.h
  kStringList,    // kohya's nargs="*" arguments: a list of "key=value" strings
};

// The kind of a key member's C++ type (an optional number is a number that may be unset).
inline KeyValueKind kind_of(bool) { return KeyValueKind::kBool; }
inline KeyValueKind kind_of(int) { return KeyValueKind::kInteger; }
inline KeyValueKind kind_of(std::int64_t) { return KeyValueKind::kInteger; }
inline KeyValueKind kind_of(std::uint64_t) { return KeyValueKind::kNonNegativeInteger; }
inline KeyValueKind kind_of(double) { return KeyValueKind::kNumber; }
inline KeyValueKind kind_of(const std::optional<double>&) { return KeyValueKind::kNumber; }
inline KeyValueKind kind_of(const std::string&) { return KeyValueKind::kString; }
inline KeyValueKind kind_of(const StepsOrRatio&) { return KeyValueKind::kStepsOrRatio; }
inline KeyValueKind kind_of(const std::vector<std::string>&) { return KeyValueKind::kStringList; }

class KeyRule {
 public:
  // Numbers: value >= lo; in [lo, hi]; in [lo, hi).
  static KeyRule at_least(double lo);
  static KeyRule in_range(double lo, double hi);
  static KeyRule in_half_open(double lo, double hi);
  // Strings: one of `choices`; any non-empty string.
  static KeyRule one_of(std::initializer_list<const char*> choices);
  static KeyRule non_empty();
  // A non-empty file name without '/'.
  static KeyRule file_name();
  // Anything the kind can hold.
  static KeyRule any();

  // "seconds >= 1" instead of "an integer >= 1".
  KeyRule unit(std::string what) &&;
  // Appended in parentheses: "an integer >= 0 (0 = all cores)".
  KeyRule note(std::string text) &&;
  // one_of only: the empty string (the key unset) is allowed too, and means `meaning`:
  // "one of: float, fp16, bf16, or unset for the training dtype".
  KeyRule or_unset(std::string meaning) &&;

  bool accepts(double value) const;
  bool accepts(const std::string& value) const;
  // What a value must look like, e.g. "an integer in [1, 8]", "one of: no, fp16, bf16".
  std::string expected(KeyValueKind kind) const;
  const std::vector<std::string>& choices() const { return choices_; }

 private:
  std::optional<double> lo_, hi_;
  bool hi_open_ = false;
  std::vector<std::string> choices_;
  bool non_empty_ = false;
  bool no_slash_ = false;
  std::string unit_, note_;
  std::optional<std::string> unset_meaning_;
};

}  // namespace lf
