// kohya's sample-prompt files (see header).
#include "common/config/sample_prompts.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <toml++/toml.h>

#include <nlohmann/json.hpp>
#include "common/text/utf8.h"

namespace lf {
namespace {

std::runtime_error error_at(const std::string& where, const std::string& what) {
  return std::runtime_error(where + ": " + what);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

long long parse_integer(const std::string& v, const std::string& opt, const std::string& where) {
  std::size_t used = 0;
  long long out = 0;
  try {
    out = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) {
    throw error_at(where, "--" + opt + " expects an integer, got '" + v + "'");
  }
  return out;
}

double parse_number(const std::string& v, const std::string& opt, const std::string& where) {
  std::size_t used = 0;
  double out = 0;
  try {
    out = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) {
    throw error_at(where, "--" + opt + " expects a number, got '" + v + "'");
  }
  return out;
}

// The largest sample side lorafleet draws: beyond it a typo ("--w 51200") would make a worker
// allocate a latent of gigabytes at the first sample step, after training began.
constexpr std::int64_t kMaxSampleSide = 16384;

// An int option's value: `v` checked against kMaxSampleSide for a size, else clamped to
// [lo, hi] before narrowing (kohya clamps the steps), so no value wraps around.
int size_value(std::int64_t v, const std::string& key, const std::string& where) {
  if (v > kMaxSampleSide) {
    throw error_at(where, key + " expects at most " + std::to_string(kMaxSampleSide) +
                              " pixels, got " + std::to_string(v));
  }
  return static_cast<int>(std::max<std::int64_t>(v, 0));
}
int clamped_int(std::int64_t v, int lo, int hi) {
  return static_cast<int>(std::clamp<std::int64_t>(v, lo, hi));
}
double finite_number(double v, const std::string& key, const std::string& where) {
  if (!std::isfinite(v)) throw error_at(where, key + " expects a finite number");
  return v;
}

// kohya's rounding of the size and bounds of the steps (sample_image_inference).
void normalise(SamplePrompt& p, const std::string& where) {
  if (trim(p.prompt).empty()) throw error_at(where, "empty prompt");
  const auto& names = sample_sampler_names();
  if (!p.sampler.empty() && std::find(names.begin(), names.end(), p.sampler) == names.end()) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    throw error_at(where, "unknown sampler '" + p.sampler + "' (expected one of: " + list + ")");
  }
  p.width = std::max(64, p.width - p.width % 8);
  p.height = std::max(64, p.height - p.height % 8);
  p.sample_steps = std::clamp(p.sample_steps, 1, 1000);
}

// One kohya option ("w 512"): its letter(s), then the value.
void apply_option(SamplePrompt& p, const std::string& option, const std::string& where) {
  const auto space = option.find(' ');
  std::string name = option.substr(0, space);  // kohya matches them with re.IGNORECASE
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string value = space == std::string::npos ? "" : trim(option.substr(space + 1));
  if (value.empty()) throw error_at(where, "--" + name + " has no value");
  if (name == "n") {
    p.negative_prompt = value;
  } else if (name == "w") {
    p.width = size_value(parse_integer(value, name, where), "--w", where);
  } else if (name == "h") {
    p.height = size_value(parse_integer(value, name, where), "--h", where);
  } else if (name == "d") {
    // kohya's pattern (\d+) does not match a negative seed: the prompt keeps a derived one.
    const long long seed = parse_integer(value, name, where);
    if (seed >= 0) p.seed = seed;
  } else if (name == "s") {
    p.sample_steps = clamped_int(parse_integer(value, name, where), 1, 1000);
  } else if (name == "l") {
    p.scale = finite_number(parse_number(value, name, where), "--l", where);
  } else if (name == "ss") {
    p.sampler = value;
  } else {
    throw error_at(where, "unknown option --" + name +
                              " (lorafleet takes kohya's --n --w --h --d --s --l --ss)");
  }
}

// The kohya keys of a toml / json prompt entry.
template <typename Get>
void apply_keys(SamplePrompt& p, const std::vector<std::string>& keys, const Get& get,
                const std::string& where) {
  for (const std::string& key : keys) {
    if (key == "prompt")
      p.prompt = get.string(key);
    else if (key == "negative_prompt")
      p.negative_prompt = get.string(key);
    else if (key == "width")
      p.width = size_value(get.integer(key), "'width'", where);
    else if (key == "height")
      p.height = size_value(get.integer(key), "'height'", where);
    else if (key == "seed")
      p.seed = get.integer(key);
    else if (key == "sample_steps")
      p.sample_steps = clamped_int(get.integer(key), 1, 1000);
    else if (key == "scale")
      p.scale = finite_number(get.number(key), "'scale'", where);
    else if (key == "sample_sampler")
      p.sampler = get.string(key);
    else if (key != "subset" && key != "enum") {
      throw error_at(where, "unknown key '" + key +
                                "' (expected prompt, negative_prompt, "
                                "width, height, seed, sample_steps, scale, sample_sampler)");
    }
  }
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read the sample prompts file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<SamplePrompt> from_txt(const std::string& text, const std::string& path) {
  std::vector<SamplePrompt> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    SamplePrompt p = parse_sample_prompt_line(line, path + ":" + std::to_string(n));
    p.index = static_cast<int>(out.size());
    p.line = n;
    out.push_back(p);
  }
  return out;
}

// 128.0 is an integer to Python's int(); 128.5 is not. Only values an int64 holds (|v| < 2^63)
// convert; anything else (5e251, inf, nan) is nullopt.
std::optional<std::int64_t> int64_of_integral(double v) {
  if (std::floor(v) == v && std::fabs(v) < 9223372036854775808.0) {
    return static_cast<std::int64_t>(v);
  }
  return std::nullopt;
}

struct TomlGet {
  const toml::table& t;
  std::string path;
  // "<path>:<line of the key>" for a message about key k.
  std::string at(const std::string& k) const {
    const toml::node* n = t.get(k);
    return path + ":" + std::to_string(n ? n->source().begin.line : t.source().begin.line);
  }
  std::string string(const std::string& k) const {
    if (auto v = t[k].value<std::string>()) return *v;
    throw error_at(at(k), "'" + k + "' expects a string");
  }
  std::int64_t integer(const std::string& k) const {
    // toml++'s value<int64_t>() casts a float without a range check (5e251: undefined
    // behaviour), so floats take the same road as in JSON.
    if (const auto* f = t[k].as_floating_point()) {
      if (auto v = int64_of_integral(f->get())) return *v;
    } else if (auto v = t[k].value<std::int64_t>()) {
      return *v;
    }
    throw error_at(at(k), "'" + k + "' expects an integer");
  }
  double number(const std::string& k) const {
    if (auto v = t[k].value<double>()) return *v;
    throw error_at(at(k), "'" + k + "' expects a number");
  }
};

std::vector<std::string> keys_of(const toml::table& t) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : t) keys.emplace_back(k.str());
  return keys;
}

// kohya: [dict(**data["prompt"], **subset) for subset in data["prompt"]["subset"]].
std::vector<SamplePrompt> from_toml(const std::string& text, const std::string& path) {
  toml::table doc;
  try {
    doc = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw error_at(path + ":" + std::to_string(e.source().begin.line), e.description().data());
  }
  const toml::table* prompt = doc["prompt"].as_table();
  if (prompt == nullptr) throw error_at(path, "expected a [prompt] table (kohya's format)");
  const toml::array* subsets = (*prompt)["subset"].as_array();
  if (subsets == nullptr) throw error_at(path, "expected [[prompt.subset]] entries");
  std::vector<SamplePrompt> out;
  SamplePrompt defaults;
  const std::string table_where = path + ":" + std::to_string(prompt->source().begin.line);
  apply_keys(defaults, keys_of(*prompt), TomlGet{*prompt, path}, table_where);
  for (const auto& node : *subsets) {
    const toml::table* subset = node.as_table();
    const std::string where = path + ":" + std::to_string(node.source().begin.line);
    if (subset == nullptr) throw error_at(where, "a prompt.subset entry must be a table");
    SamplePrompt p = defaults;
    apply_keys(p, keys_of(*subset), TomlGet{*subset, path}, where);
    p.index = static_cast<int>(out.size());
    p.line = static_cast<int>(node.source().begin.line);
    normalise(p, where);
    out.push_back(p);
  }
  return out;
}

struct JsonGet {
  const nlohmann::json& j;
  std::string where;
  std::string string(const std::string& k) const {
    if (j[k].is_string()) return j[k].get<std::string>();
    throw error_at(where, "'" + k + "' expects a string");
  }
  std::int64_t integer(const std::string& k) const {
    if (j[k].is_number_unsigned()) {
      if (j[k].get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX)) {
        return static_cast<std::int64_t>(j[k].get<std::uint64_t>());
      }
    } else if (j[k].is_number_integer()) {
      return j[k].get<std::int64_t>();
    }
    if (j[k].is_number_float()) {
      if (auto v = int64_of_integral(j[k].get<double>())) return *v;
    }
    throw error_at(where, "'" + k + "' expects an integer");
  }
  double number(const std::string& k) const {
    if (j[k].is_number()) return j[k].get<double>();
    throw error_at(where, "'" + k + "' expects a number");
  }
};

std::vector<SamplePrompt> from_json(const std::string& text, const std::string& path) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number past a double ("1E5555").
    throw error_at(path, std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_array()) throw error_at(path, "expected a list of prompts (kohya's format)");
  std::vector<SamplePrompt> out;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const std::string where = path + ": prompt " + std::to_string(i + 1);
    SamplePrompt p;
    if (doc[i].is_string()) {
      p = parse_sample_prompt_line(doc[i].get<std::string>(), where);
    } else if (doc[i].is_object()) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : doc[i].items()) keys.push_back(k);
      apply_keys(p, keys, JsonGet{doc[i], where}, where);
      normalise(p, where);
    } else {
      throw error_at(where, "expected an object or a prompt line");
    }
    p.index = static_cast<int>(out.size());
    out.push_back(p);
  }
  return out;
}

}  // namespace

const std::vector<std::string>& sample_sampler_names() {
  static const std::vector<std::string> names = {"ddim",      "euler",       "k_euler", "euler_a",
                                                 "k_euler_a", "dpmsolver++", "k_dpm_2", "dpm_2"};
  return names;
}

SamplePrompt parse_sample_prompt_line(const std::string& line, const std::string& where) {
  SamplePrompt p;
  // kohya: line.split(" --"), the first part the prompt.
  std::size_t pos = line.find(" --");
  p.prompt = trim(line.substr(0, pos));
  while (pos != std::string::npos) {
    const std::size_t next = line.find(" --", pos + 3);
    apply_option(
        p,
        trim(line.substr(pos + 3, next == std::string::npos ? std::string::npos : next - pos - 3)),
        where);
    pos = next;
  }
  normalise(p, where);
  return p;
}

// The line and column of byte `offset` of `text`, for "<path>:<line>: ..." messages.
static std::string where_of(const std::string& text, const std::string& path, std::size_t offset) {
  const auto line = 1 + std::count(text.begin(), text.begin() + offset, '\n');
  return path + ":" + std::to_string(line);
}

std::vector<SamplePrompt> parse_sample_prompts(const std::string& text, const std::string& path) {
  // The text travels to the workers in a protobuf string, and kohya reads it as UTF-8.
  const std::size_t bad = find_invalid_utf8(text);
  if (bad != std::string::npos) {
    throw error_at(where_of(text, path, bad), "not UTF-8 text (byte " + std::to_string(bad) +
                                                  "; save the prompt file as "
                                                  "UTF-8)");
  }
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) return parse_sample_prompts(text.substr(3), path);
  auto ends_with = [&path](const char* ext) {
    const std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  std::vector<SamplePrompt> out;
  if (ends_with(".txt"))
    out = from_txt(text, path);
  else if (ends_with(".toml"))
    out = from_toml(text, path);
  else if (ends_with(".json"))
    out = from_json(text, path);
  else
    throw std::runtime_error(path + ": sample prompts must be a .txt, .toml or .json file");
  if (out.empty()) throw std::runtime_error(path + ": no prompt in the sample prompts file");
  return out;
}

std::string read_sample_prompts_file(const std::string& path) { return read_all(path); }

std::vector<SamplePrompt> load_sample_prompts(const std::string& path) {
  return parse_sample_prompts(read_all(path), path);
}

}  // namespace lf
