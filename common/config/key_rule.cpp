// Rules of single job-config keys (see header).
#include "common/config/key_rule.h"

#include <algorithm>
#include <sstream>

namespace lf {
namespace {

std::string num(double d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

std::string noun(KeyValueKind kind) {
  switch (kind) {
    case KeyValueKind::kBool: return "true or false";
    case KeyValueKind::kInteger: return "an integer";
    case KeyValueKind::kNonNegativeInteger: return "a non-negative integer";
    case KeyValueKind::kNumber: return "a number";
    case KeyValueKind::kString: return "a string";
    case KeyValueKind::kStepsOrRatio:
      return "a step count (an integer) or a ratio of the total steps (a number below 1, or a "
             "percentage such as 10%)";
    case KeyValueKind::kStringList: return "a list of \"key=value\" strings";
  }
  return "a value";
}

}  // namespace

KeyRule KeyRule::at_least(double lo) {
  KeyRule r;
  r.lo_ = lo;
  return r;
}

KeyRule KeyRule::in_range(double lo, double hi) {
  KeyRule r;
  r.lo_ = lo;
  r.hi_ = hi;
  return r;
}

KeyRule KeyRule::in_half_open(double lo, double hi) {
  KeyRule r = in_range(lo, hi);
  r.hi_open_ = true;
  return r;
}

KeyRule KeyRule::one_of(std::initializer_list<const char*> choices) {
  KeyRule r;
  r.choices_.assign(choices.begin(), choices.end());
  return r;
}

KeyRule KeyRule::non_empty() {
  KeyRule r;
  r.non_empty_ = true;
  return r;
}

KeyRule KeyRule::file_name() {
  KeyRule r = non_empty();
  r.unit_ = "file name";
  r.no_slash_ = true;
  return r;
}

KeyRule KeyRule::any() { return KeyRule(); }

KeyRule KeyRule::unit(std::string what) && {
  unit_ = std::move(what);
  return std::move(*this);
}

KeyRule KeyRule::note(std::string text) && {
  note_ = std::move(text);
  return std::move(*this);
}

KeyRule KeyRule::or_unset(std::string meaning) && {
  unset_meaning_ = std::move(meaning);
  return std::move(*this);
}

bool KeyRule::accepts(double value) const {
  if (lo_ && value < *lo_) return false;
  if (hi_ && (hi_open_ ? value >= *hi_ : value > *hi_)) return false;
  return true;
}

bool KeyRule::accepts(const std::string& value) const {
  if (value.empty() && unset_meaning_) return true;
  if (non_empty_ && value.empty()) return false;
  if (no_slash_ && value.find('/') != std::string::npos) return false;
  return choices_.empty() || std::find(choices_.begin(), choices_.end(), value) != choices_.end();
}

std::string KeyRule::expected(KeyValueKind kind) const {
  std::string out;
  if (!choices_.empty()) {
    out = "one of: ";
    for (std::size_t i = 0; i < choices_.size(); ++i) out += (i ? ", " : "") + choices_[i];
  } else if (non_empty_) {
    out = "a non-empty " + (unit_.empty() ? std::string("string") : unit_);
    if (no_slash_) out += " without '/'";
  } else {
    out = unit_.empty() ? noun(kind) : unit_;
    if (lo_ && hi_) {
      out += " in [" + num(*lo_) + ", " + num(*hi_) + (hi_open_ ? ")" : "]");
    } else if (lo_) {
      out += " >= " + num(*lo_);
    }
  }
  if (!note_.empty()) out += " (" + note_ + ")";
  if (unset_meaning_) out += ", or unset for " + *unset_meaning_;
  return out;
}

}  // namespace lf
