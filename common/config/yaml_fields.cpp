// Typed YAML fields of the job config (see header).
#include "common/config/yaml_fields.h"

#include <cmath>
#include <sstream>

namespace lf {
namespace job_yaml {

void Parser::fail(int line, const std::string& message) const {
  throw ConfigError(source_ + ":" + std::to_string(line) + ": " + message);
}

void Parser::fail_key(int line, const std::string& key, const std::string& problem) const {
  fail(line, "key '" + key + "': " + problem);
}

int Parser::line_of(const YAML::Node& node, int fallback) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? fallback : mark.line + 1;
}

std::string Parser::describe(const YAML::Node& value) {
  switch (value.Type()) {
    case YAML::NodeType::Scalar: return "'" + value.Scalar() + "'";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Null: return "nothing (null)";
    case YAML::NodeType::Undefined: break;
  }
  return "an undefined value";
}

Field Parser::int_field(const std::string& key, int* target) {
  return {key, [this, target](const YAML::Node& v, const std::string& k, int line) {
            *target = scalar_as<int>(v, k, line, "an integer");
          }};
}

Field Parser::i64_field(const std::string& key, std::int64_t* target) {
  return {key, [this, target](const YAML::Node& v, const std::string& k, int line) {
            *target = scalar_as<std::int64_t>(v, k, line, "an integer");
          }};
}

Field Parser::u64_field(const std::string& key, std::uint64_t* target) {
  return {key, [this, target](const YAML::Node& v, const std::string& k, int line) {
            *target = scalar_as<std::uint64_t>(v, k, line, "a non-negative integer");
          }};
}

Field Parser::double_field(const std::string& key, double* target) {
  return {key, [this, target](const YAML::Node& v, const std::string& k, int line) {
            const double d = scalar_as<double>(v, k, line, "a number");
            if (!std::isfinite(d)) {
              fail_key(line, k, "expected a finite number, got " + describe(v));
            }
            *target = d;
          }};
}

Field Parser::optional_double_field(const std::string& key, std::optional<double>* target) {
  return {key, [this, key, target](const YAML::Node& v, const std::string& k, int line) {
            if (v.IsNull()) {
              target->reset();
              return;
            }
            double d = 0;
            double_field(key, &d).set(v, k, line);
            *target = d;
          }};
}

Field Parser::bool_field(const std::string& key, bool* target) {
  return {key, [this, target](const YAML::Node& v, const std::string& k, int line) {
            *target = scalar_as<bool>(v, k, line, "true or false");
          }};
}

Field Parser::string_field(const std::string& key, std::string* target) {
  return {key, [this, target](const YAML::Node& v, const std::string& k, int line) {
            if (v.IsNull()) {
              target->clear();
              return;
            }
            if (!v.IsScalar()) fail_key(line, k, "expected a string, got " + describe(v));
            *target = v.Scalar();
          }};
}

dk::GivenValue Parser::given(const YAML::Node& v, const dk::KeySpec& spec, const std::string& k,
                             int line) const {
  dk::GivenValue g;
  g.line = line;
  g.text = describe(v);
  const std::string expected = dk::expected_of(spec.type);
  if (v.IsNull() && spec.type != dk::KeyType::kString && !spec.supported) {
    g.null = true;
    return g;
  }
  switch (spec.type) {
    case dk::KeyType::kBool: g.b = scalar_as<bool>(v, k, line, expected); break;
    case dk::KeyType::kInt: g.i = scalar_as<int>(v, k, line, expected); break;
    case dk::KeyType::kNumber:
      g.d = finite(v, k, line, scalar_as<double>(v, k, line, expected));
      break;
    case dk::KeyType::kString:
      if (!v.IsNull() && !v.IsScalar()) fail_key(line, k, "expected a string, got " + g.text);
      g.s = v.IsNull() ? "" : v.Scalar();
      break;
    case dk::KeyType::kResolution:
      if (v.IsScalar()) {
        g.w = g.h = scalar_as<int>(v, k, line, expected);
        break;
      }
      if (!v.IsSequence() || v.size() != 2) {
        fail_key(line, k, "expected " + expected + ", got " + g.text);
      }
      g.w = scalar_as<int>(v[0], k, line_of(v[0], line), expected);
      g.h = scalar_as<int>(v[1], k, line_of(v[1], line), expected);
      break;
    case dk::KeyType::kFloatPair:
      if (!v.IsSequence() || v.size() != 2) {
        fail_key(line, k, "expected " + expected + ", got " + g.text);
      }
      g.lo = finite(v[0], k, line, scalar_as<double>(v[0], k, line_of(v[0], line), expected));
      g.hi = finite(v[1], k, line, scalar_as<double>(v[1], k, line_of(v[1], line), expected));
      break;
    case dk::KeyType::kTable:
      if (!v.IsMap()) fail_key(line, k, "expected " + expected + ", got " + g.text);
      g.table_size = v.size();
      break;
  }
  return g;
}

double Parser::finite(const YAML::Node& v, const std::string& k, int line, double d) const {
  if (!std::isfinite(d)) fail_key(line, k, "expected a finite number, got " + describe(v));
  return d;
}

std::vector<Field> Parser::kohya_fields(dk::Level kind, dk::GivenLevel* level,
                                        std::vector<std::string>* warnings) const {
  std::vector<Field> out;
  for (const dk::KeySpec& spec : dk::all_keys()) {
    if ((spec.levels & kind) == 0) continue;
    const dk::KeySpec* sp = &spec;
    out.push_back(
        {spec.name,
         [this, sp, level, warnings](const YAML::Node& v, const std::string& k, int line) {
           dk::store(*level, *sp, given(v, *sp, k, line), warnings);
         },
         spec.canonical == nullptr});
  }
  return out;
}

void Parser::apply(const YAML::Node& map, const std::string& prefix,
                   const std::vector<Field>& fields, int section_line,
                   const MisplacedHint& misplaced) {
  if (map.IsNull()) return;  // "dataset:" with nothing under it keeps the defaults
  if (!map.IsMap()) {
    fail(section_line,
         "section '" + prefix + "': expected a mapping of keys, got " + describe(map));
  }
  for (const auto& kv : map) {
    const int key_line = line_of(kv.first, section_line);
    if (!kv.first.IsScalar()) fail(key_line, "section '" + prefix + "': keys must be strings");
    const std::string name = kv.first.Scalar();
    const std::string full = prefix.empty() ? name : prefix + "." + name;
    const Field* field = nullptr;
    for (const auto& f : fields) {
      if (f.key == name) field = &f;
    }
    if (field == nullptr) {
      const std::string hint = misplaced ? misplaced(name) : std::string();
      if (!hint.empty()) fail_key(key_line, full, hint);
      std::string expected;
      for (const auto& f : fields) {
        if (f.listed) expected += (expected.empty() ? "" : ", ") + f.key;
      }
      fail(key_line, "unknown key '" + full + "' (expected one of: " + expected + ")");
    }
    if (lines_.count(full) != 0) {
      fail(key_line,
           "duplicate key '" + full + "' (first set on line " + std::to_string(lines_[full]) + ")");
    }
    // Errors about a value point at its key's line (a null value's mark is the next line).
    lines_[full] = key_line;
    field->set(kv.second, full, key_line);
  }
}

int Parser::line_for(const std::string& key) const {
  auto it = lines_.find(key);
  if (it != lines_.end()) return it->second;
  auto sec = lines_.find(key.substr(0, key.find('.')));
  return sec != lines_.end() ? sec->second : 1;
}

Field Parser::typed_field(const std::string& key, StepsOrRatio* target) {
  return {key, [this, target](const YAML::Node& v, const std::string& k, int line) {
            // Quoted or not: kohya's "10%" is a string on its command line.
            const std::optional<StepsOrRatio> parsed =
                v.IsScalar() ? parse_steps_or_ratio(v.Scalar()) : std::nullopt;
            if (!parsed) {
              fail_key(line, k,
                       "expected " + KeyRule::any().expected(KeyValueKind::kStepsOrRatio) +
                           ", got " + describe(v));
            }
            *target = *parsed;
          }};
}

Field Parser::typed_field(const std::string& key, std::vector<std::string>* target) {
  return {key, [this, target](const YAML::Node& v, const std::string& k, int line) {
            target->clear();
            if (v.IsNull()) return;
            if (v.IsScalar()) {  // one argument, as "--lr_scheduler_args a=1" on kohya's CLI
              target->push_back(v.Scalar());
              return;
            }
            if (!v.IsSequence()) {
              fail_key(line, k,
                       "expected " + KeyRule::any().expected(KeyValueKind::kStringList) + ", got " +
                           describe(v));
            }
            for (const YAML::Node& item : v) {
              if (!item.IsScalar()) {
                fail_key(line_of(item, line), k,
                         "expected " + KeyRule::any().expected(KeyValueKind::kStringList) +
                             ", got an item that is " + describe(item));
              }
              target->push_back(item.Scalar());
            }
          }};
}

void Parser::check_rules() const {
  for (const auto& check : rule_checks_) check();
}

std::string Parser::shown(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace job_yaml
}  // namespace lf
