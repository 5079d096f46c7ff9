// Typed reading of a YAML mapping into config fields, for the job-config parser: each key is a
// Field whose setter converts its value, and every error reads "<file>:<line>: key '<dotted
// key>': expected <what>, got <value>", so a typo fails at start-up instead of silently
// training with a default. Unknown and duplicate keys fail too, with the keys that are allowed.
// The kohya dataset keys are read as their dataset_keys.h types. Internal to common/config.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/config/dataset_keys.h"
#include "common/config/job_config.h"
#include "common/config/key_rule.h"

namespace lf {
namespace job_yaml {

namespace dk = dataset_keys;

// What a key is bound to: a setter that converts the YAML value or throws ConfigError.
using Setter = std::function<void(const YAML::Node& value, const std::string& key, int line)>;

struct Field {
  std::string key;
  Setter set;
  bool listed = true;  // named in "expected one of" (false for kohya's legacy spellings)
};

// For a key that is not a field here: "" (truly unknown) or why it is misplaced.
using MisplacedHint = std::function<std::string(const std::string& name)>;

class Parser {
 public:
  explicit Parser(std::string source_name) : source_(std::move(source_name)) {}

  // Throw ConfigError("<file>:<line>: <message>") / "...: key '<key>': <problem>".
  [[noreturn]] void fail(int line, const std::string& message) const;
  [[noreturn]] void fail_key(int line, const std::string& key, const std::string& problem) const;

  // 1-based line of `node`, or `fallback` when it has no position.
  static int line_of(const YAML::Node& node, int fallback);

  // Renders a value for "got ..." in messages.
  static std::string describe(const YAML::Node& value);

  // The fields of one level of kohya keys, storing into `level` (which must outlive the apply).
  std::vector<Field> kohya_fields(dk::Level kind, dk::GivenLevel* level,
                                  std::vector<std::string>* warnings) const;

  // Applies a mapping node to the fields of one section; unknown and duplicate keys fail.
  void apply(const YAML::Node& map, const std::string& prefix, const std::vector<Field>& fields,
             int section_line, const MisplacedHint& misplaced = {});

  // Line of a key's value when it was given, else of its section, else 1.
  int line_for(const std::string& key) const;

  // The field of a declared key (job_keys.h) `section`.`name`, storing into `target`. Its rule
  // is checked by check_rules(), once every key is read, so that a default is held to it too.
  template <typename T>
  Field key_field(const std::string& section, const std::string& name, T* target, KeyRule rule) {
    const std::string key = section + "." + name;
    rule_checks_.push_back([this, key, target, rule = std::move(rule)] {
      if (!rule_accepts(rule, *target)) {
        fail_key(line_for(key), key,
                 "expected " + rule.expected(kind_of(*target)) + ", got " + shown(*target));
      }
    });
    return typed_field(name, target);
  }
  // Every key_field's rule, in the order the fields were made (the dataset section's first, then
  // the other sections in job_keys.h order); throws ConfigError for the first broken one.
  void check_rules() const;

  // The scalar `value` as T, or a ConfigError "expected <expected>, got ...".
  template <typename T>
  T scalar_as(const YAML::Node& value, const std::string& key, int line,
              const std::string& expected) const {
    T out{};
    if (!value.IsScalar() || !YAML::convert<T>::decode(value, out)) {
      fail_key(line, key, "expected " + expected + ", got " + describe(value));
    }
    // yaml-cpp also converts quoted scalars ('10', "true"); a quoted value is a string, and the
    // TOML form rejects it too, so the YAML form does as well.
    if (value.Tag() == "!") {
      fail_key(line, key,
               "expected " + expected + ", got the quoted string " + describe(value) +
                   " (remove the quotes)");
    }
    return out;
  }

 private:
  // Fields that store a scalar of their type into `target`; numbers must be finite.
  Field int_field(const std::string& key, int* target);
  Field i64_field(const std::string& key, std::int64_t* target);
  Field u64_field(const std::string& key, std::uint64_t* target);
  Field double_field(const std::string& key, double* target);

  // Unset (or a null value) stays std::nullopt.
  Field optional_double_field(const std::string& key, std::optional<double>* target);

  Field bool_field(const std::string& key, bool* target);
  // A null value ("key:" with nothing after it) reads as the empty string.
  Field string_field(const std::string& key, std::string* target);

  // A kohya dataset-config key read at `level` (see dataset_keys.h): typed like its TOML form.
  // A null value is "" for strings and kohya's None for the keys lorafleet does not implement.
  dk::GivenValue given(const YAML::Node& v, const dk::KeySpec& spec, const std::string& k,
                       int line) const;

  // `d`, or a ConfigError when it is not finite.
  double finite(const YAML::Node& v, const std::string& k, int line, double d) const;

  Field typed_field(const std::string& key, bool* t) { return bool_field(key, t); }
  Field typed_field(const std::string& key, int* t) { return int_field(key, t); }
  Field typed_field(const std::string& key, std::int64_t* t) { return i64_field(key, t); }
  Field typed_field(const std::string& key, std::uint64_t* t) { return u64_field(key, t); }
  Field typed_field(const std::string& key, double* t) { return double_field(key, t); }
  Field typed_field(const std::string& key, std::optional<double>* t) {
    return optional_double_field(key, t);
  }
  Field typed_field(const std::string& key, std::string* t) { return string_field(key, t); }
  Field typed_field(const std::string& key, StepsOrRatio* t);
  Field typed_field(const std::string& key, std::vector<std::string>* t);

  // Whether `value` follows `rule` (an unset optional and a bool always do).
  static bool rule_accepts(const KeyRule&, bool) { return true; }
  static bool rule_accepts(const KeyRule& rule, const std::string& v) { return rule.accepts(v); }
  static bool rule_accepts(const KeyRule&, const StepsOrRatio&) { return true; }  // parse checks
  static bool rule_accepts(const KeyRule&, const std::vector<std::string>&) { return true; }
  static bool rule_accepts(const KeyRule& rule, const std::optional<double>& v) {
    return !v || rule.accepts(*v);
  }
  template <typename Number>
  static bool rule_accepts(const KeyRule& rule, Number v) {
    return rule.accepts(static_cast<double>(v));
  }

  // A value for "got ...": 0, 0.5, 'text', nothing (an empty string).
  static std::string shown(const std::string& v) { return v.empty() ? "nothing" : "'" + v + "'"; }
  static std::string shown(const std::optional<double>& v) { return v ? shown(*v) : "nothing"; }
  static std::string shown(double v);
  static std::string shown(const StepsOrRatio& v) { return v.text(); }
  static std::string shown(const std::vector<std::string>& v) { return std::to_string(v.size()); }
  template <typename Integer>
  static std::string shown(Integer v) {
    return std::to_string(v);
  }

  std::string source_;
  std::map<std::string, int> lines_;
  std::vector<std::function<void()>> rule_checks_;
};

}  // namespace job_yaml
}  // namespace lf
