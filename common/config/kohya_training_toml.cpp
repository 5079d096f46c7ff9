// The kohya training TOML reader (kohya_training_toml.h): toml++ reads the file, its tables are
// flattened as kohya's read_config_from_file does, each argument is turned into a line of the
// equivalent job YAML (remembering the file and line it came from), the lorafleet job YAML's
// keys are added, and parse_job_config checks the whole; its messages are pointed back at the
// file and line that gave the value.
#include "common/config/kohya_training_toml.h"

#include <toml++/toml.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "common/config/kohya_arg_fates.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

// Where a line of the generated YAML came from.
struct Origin {
  std::string where;  // "train.toml:12" / "job.yaml:3"
  std::string arg;    // the kohya argument that gave it ("" for a job YAML key)
};

// The generated job YAML: sections of "key: value" lines, each with its origin.
class YamlBuilder {
 public:
  // Adds `section`.`key`; a key given twice (by the two files, or two kohya arguments that set
  // the same key) is a ConfigError naming both places.
  void add(const std::string& section, const std::string& key, const std::string& value,
           const Origin& origin) {
    Section& s = section_(section, origin);
    for (const Line& l : s.lines) {
      if (l.key == key) {
        throw ConfigError(origin.where + ": key '" + section + "." + key + "'" + by(origin) +
                          ": already given at " + l.origin.where + by(l.origin) + "; give it once");
      }
    }
    s.lines.push_back({key, value, origin});
  }
  // A top-level key of the job YAML that is not a mapping (e.g. `datasets:`), as one line.
  void add_top(const std::string& key, const std::string& value, const Origin& origin) {
    Section& s = section_(key, origin);
    s.value = value;
    s.is_value = true;
  }
  bool has(const std::string& section, const std::string& key) const {
    for (const Section& s : sections_) {
      if (s.name != section) continue;
      for (const Line& l : s.lines) {
        if (l.key == key) return true;
      }
    }
    return false;
  }
  // The YAML text; origins[i] is where line i + 1 came from.
  std::string text(std::vector<Origin>* origins) const {
    std::string out;
    for (const Section& s : sections_) {
      if (s.is_value) {
        out += s.name + ": " + s.value + "\n";
        origins->push_back(s.header);
        continue;
      }
      out += s.name + ":\n";
      origins->push_back(s.lines.empty() ? s.header : s.lines.front().origin);
      for (const Line& l : s.lines) {
        out += "  " + l.key + ": " + l.value + "\n";
        origins->push_back(l.origin);
      }
    }
    return out;
  }

 private:
  struct Line {
    std::string key, value;
    Origin origin;
  };
  struct Section {
    std::string name;
    Origin header;
    std::vector<Line> lines;
    bool is_value = false;
    std::string value;
  };
  static std::string by(const Origin& o) {
    return o.arg.empty() ? "" : " (kohya argument '" + o.arg + "')";
  }
  Section& section_(const std::string& name, const Origin& origin) {
    for (Section& s : sections_) {
      if (s.name == name) return s;
    }
    sections_.push_back({name, origin, {}, false, ""});
    return sections_.back();
  }
  std::vector<Section> sections_;
};

// A YAML double-quoted scalar.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      std::ostringstream os;
      os << "\\x" << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(c);
      out += os.str();
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// The shortest text that reads back as `d`, always with a '.' or an exponent, so that YAML
// reads it as the float TOML wrote.
std::string float_text(double d) {
  if (std::isnan(d)) return ".nan";
  if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
  std::string s;
  for (int precision = 1; precision <= 17; ++precision) {
    std::ostringstream os;
    os << std::setprecision(precision) << d;
    s = os.str();
    if (std::stod(s) == d) break;
  }
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string describe(const toml::node& n) {
  if (const auto* s = n.as_string()) return "'" + s->get() + "'";
  if (const auto* i = n.as_integer()) return std::to_string(i->get());
  if (const auto* f = n.as_floating_point()) return float_text(f->get());
  if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
  if (n.is_array()) return "an array";
  if (n.is_table()) return "a table";
  return "a date or time";
}

int line_of(const toml::source_region& r, int fallback) {
  return r.begin.line > 0 ? static_cast<int>(r.begin.line) : fallback;
}

// One argument of the flattened file.
struct TomlArg {
  std::string name;
  const toml::node* node;
  int line;
  int column;
};

// The reader of one kohya training TOML into a YamlBuilder.
class KohyaToml {
 public:
  KohyaToml(std::string path, YamlBuilder* out, std::vector<std::string>* warnings)
      : path_(std::move(path)), out_(out), warnings_(warnings) {}

  void read(const std::string& text) {
    toml::table root;
    try {
      root = toml::parse(text, path_);
    } catch (const toml::parse_error& e) {
      throw ConfigError(path_ + ":" + std::to_string(line_of(e.source(), 1)) +
                        ": TOML syntax error: " + std::string(e.description()));
    }
    for (const TomlArg& a : flatten(root)) apply(a);
    check_network_module();
  }

  // kohya's defaults where they differ from lorafleet's, for the keys no file gave.
  void add_kohya_defaults() {
    for (const KohyaArg& a : kohya_args()) {
      if (a.fate != KohyaArgFate::kKey || *a.kohya_default == '\0') continue;
      const std::string target = kohya_arg_target(a.name);
      const std::size_t dot = target.find('.');
      if (out_->has(target.substr(0, dot), target.substr(dot + 1))) continue;
      out_->add(target.substr(0, dot), target.substr(dot + 1), a.kohya_default,
                {path_ + ":1", a.name});
    }
  }

 private:
  [[noreturn]] void fail(const TomlArg& a, const std::string& problem) const {
    throw ConfigError(where(a) + ": kohya argument '" + a.name + "': " + problem);
  }
  void warn(const TomlArg& a, const std::string& text) const {
    warnings_->push_back(where(a) + ": kohya argument '" + a.name + "': " + text);
  }
  std::string where(const TomlArg& a) const { return path_ + ":" + std::to_string(a.line); }

  // kohya read_config_from_file: a top-level table's keys join the top-level keys; kohya keeps
  // the last of two equal names silently, lorafleet refuses the second.
  std::vector<TomlArg> flatten(const toml::table& root) const {
    std::vector<TomlArg> out;
    auto add = [&](const toml::key& k, const toml::node& v) {
      TomlArg a{std::string(k.str()), &v, line_of(k.source(), 1),
                static_cast<int>(k.source().begin.column)};
      for (const TomlArg& b : out) {
        if (b.name == a.name) {
          fail(a, "given twice (also at line " + std::to_string(b.line) +
                      "); kohya flattens the tables and keeps the last silently, lorafleet "
                      "refuses it");
        }
      }
      out.push_back(a);
    };
    for (auto&& [k, v] : root) {
      const toml::table* t = v.as_table();
      if (t == nullptr) {
        add(k, v);
        continue;
      }
      for (auto&& [sk, sv] : *t) {
        if (sv.is_table()) {
          fail({std::string(sk.str()), &sv, line_of(sk.source(), 1), 0},
               "expected a value (kohya flattens one level of tables), got a table");
        }
        add(sk, sv);
      }
    }
    std::sort(out.begin(), out.end(), [](const TomlArg& a, const TomlArg& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
    return out;
  }

  void apply(const TomlArg& a) {
    const KohyaArg* k = find_kohya_arg(a.name);
    if (k == nullptr) fail(a, unknown_hint(a.name));
    switch (effective_fate(*k)) {
      case KohyaArgFate::kKey: set_key(a, kohya_arg_target(a.name), value_of(a)); return;
      case KohyaArgFate::kMapped: apply_mapped(a); return;
      case KohyaArgFate::kIgnored: warn(a, std::string("ignored: ") + k->detail); return;
      case KohyaArgFate::kNoOpOnly:
        if (!is_noop(*a.node, k->noop)) {
          fail(a, std::string("refused: ") + k->detail + " (only " + kohya_noop_text(*k) +
                      " is accepted, got " + describe(*a.node) + ")");
        }
        warn(a, std::string("has no effect at this value: ") + k->detail);
        return;
    }
  }

  static std::string unknown_hint(const std::string& name) {
    const std::string target = kohya_arg_target(name);
    if (target.rfind("network.", 0) == 0) {
      return "not a train_network.py argument: kohya passes it in network_args, e.g. "
             "network_args = [\"" +
             name + "=...\"]";
    }
    if (!target.empty()) {
      return "not a kohya argument but lorafleet's job key '" + target +
             "': give it in the job YAML (lorafleet-coordinator --config)";
    }
    return "unknown: not a train_network.py argument lorafleet knows (lorafleet-coordinator "
           "--list-kohya-args lists them)";
  }

  void set_key(const TomlArg& a, const std::string& target, const std::string& value) {
    const std::size_t dot = target.find('.');
    out_->add(target.substr(0, dot), target.substr(dot + 1), value, {where(a), a.name});
  }

  // The YAML value of an argument, with kohya's command-line forms of some arguments turned
  // into the job YAML's: resolution "512,768" -> [512, 768], face_crop_aug_range likewise, and
  // SDXL's text_encoder_lr list (nargs="*") -> its one value.
  std::string value_of(const TomlArg& a) const {
    const auto* s = a.node->as_string();
    if (s != nullptr && (a.name == "resolution" || a.name == "face_crop_aug_range")) {
      return comma_list(s->get());
    }
    if (a.name == "text_encoder_lr" && a.node->is_array()) return one_lr(a);
    return yaml_of(a, *a.node);
  }

  std::string yaml_of(const TomlArg& a, const toml::node& n) const {
    if (const auto* s = n.as_string()) return quoted(s->get());
    if (const auto* i = n.as_integer()) return std::to_string(i->get());
    if (const auto* f = n.as_floating_point()) return float_text(f->get());
    if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
    if (const auto* arr = n.as_array()) {
      std::string out = "[";
      for (std::size_t i = 0; i < arr->size(); ++i) {
        out += (i ? ", " : "") + yaml_of(a, *arr->get(i));
      }
      return out + "]";
    }
    fail(a, "expected a value (kohya flattens one level of tables), got " + describe(n));
  }

  // "512,768" -> [512, 768]; "512" -> 512; anything else stays a string for the parser to
  // refuse with the key's expected form.
  static std::string comma_list(const std::string& text) {
    std::vector<std::string> parts;
    std::stringstream ss(text);
    for (std::string part; std::getline(ss, part, ',');) {
      part.erase(0, part.find_first_not_of(' '));
      part.erase(part.find_last_not_of(' ') + 1);
      if (part.empty() || part.find_first_not_of("0123456789.") != std::string::npos) {
        return quoted(text);
      }
      parts.push_back(part);
    }
    if (parts.size() == 1) return parts[0];
    if (parts.size() != 2) return quoted(text);
    return "[" + parts[0] + ", " + parts[1] + "]";
  }

  std::string one_lr(const TomlArg& a) const {
    const toml::array& arr = *a.node->as_array();
    if (arr.empty()) fail(a, "expected a number or a list of numbers, got an empty list");
    const std::string first = yaml_of(a, *arr.get(0));
    for (std::size_t i = 1; i < arr.size(); ++i) {
      if (yaml_of(a, *arr.get(i)) != first) {
        fail(a, "lorafleet has one text_encoder_lr for both SDXL text encoders, got " +
                    std::to_string(arr.size()) + " different values (" + not_implemented + ")");
      }
    }
    return first;
  }

  void apply_mapped(const TomlArg& a) {
    if (a.name == "network_args") return network_args(a);
    if (a.name == "network_module") {
      const std::string m = string_arg(a);
      if (m != "networks.lora" && m != "lycoris.kohya" && m != "networks.oft") {
        fail(a, "'" + m + "' is " + not_implemented +
                    ": lorafleet trains networks.lora, networks.oft and lycoris.kohya (algo=loha / "
                    "lokr) only");
      }
      network_module_ = std::make_pair(a, m);
      return;
    }
    if (a.name == "save_model_as") {
      const std::string f = string_arg(a);
      if (f != "safetensors") fail(a, "'" + f + "' refused: lorafleet writes .safetensors only");
      return;
    }
    if (!bool_arg(a)) return;  // no_half_vae, use_8bit_adam, use_lion_optimizer: false is a no-op
    if (a.name == "no_half_vae") return set_key(a, "model.vae_dtype", quoted("fp32"));
    set_key(a, "training.optimizer_type", quoted(a.name == "use_8bit_adam" ? "AdamW8bit" : "Lion"));
  }

  std::string string_arg(const TomlArg& a) const {
    const auto* s = a.node->as_string();
    if (s == nullptr) fail(a, "expected a string, got " + describe(*a.node));
    return s->get();
  }
  bool bool_arg(const TomlArg& a) const {
    const auto* b = a.node->as_boolean();
    if (b == nullptr) fail(a, "expected true or false, got " + describe(*a.node));
    return b->get();
  }

  // kohya networks.lora network_args: "key=value" strings, each value read by the network key
  // of the same name (job_keys(), section network).
  void network_args(const TomlArg& a) {
    std::vector<std::string> items;
    if (const auto* s = a.node->as_string()) {
      items.push_back(s->get());
    } else if (const auto* arr = a.node->as_array()) {
      for (const toml::node& n : *arr) {
        const auto* s = n.as_string();
        if (s == nullptr) fail(a, "expected \"key=value\" strings, got an item " + describe(n));
        items.push_back(s->get());
      }
    } else {
      fail(a, "expected a list of \"key=value\" strings, got " + describe(*a.node));
    }
    for (const std::string& item : items) network_arg(a, item);
  }

  void network_arg(const TomlArg& a, const std::string& item) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) fail(a, "expected \"key=value\", got '" + item + "'");
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    k.erase(0, k.find_first_not_of(' '));
    k.erase(k.find_last_not_of(' ') + 1);
    v.erase(0, v.find_first_not_of(' '));
    v.erase(v.find_last_not_of(' ') + 1);
    const JobKeyInfo* key = nullptr;
    std::string known;
    for (const JobKeyInfo& info : job_keys()) {
      if (info.section != "network") continue;
      if (info.name == k) key = &info;
      known += (known.empty() ? "" : ", ") + info.name;
    }
    if (key == nullptr) {
      fail(a, "'" + k + "' is not a network option lorafleet has (" + not_implemented +
                  "); the network keys are: " + known);
    }
    if (k == "algo") algo_ = std::make_pair(a, v);
    if (k == "dora_wd" && (v == "True" || v == "true")) dora_ = a;
    if (k == "enable_all_linear" || k == "enable_conv") {
      // kohya networks.oft reads them with Python's bool(str): every non-empty value is true.
      if (v != "True" && v != "true") {
        fail(a, k + "=" + v +
                    " would be true in kohya networks.oft (it takes bool() of the "
                    "string, so any value turns it on); write " +
                    k + "=True, or leave the argument out to keep it off");
      }
      oft_args_.push_back(a);
    }
    set_key(a, "network." + k, network_value(key->kind, v));
  }

  // network_module and network_args' algo agree: lycoris.kohya needs an algo lorafleet has
  // (LyCORIS's default, its own LoCon, is not lorafleet's networks.lora), and an algo other than
  // lora needs lycoris.kohya (kohya's networks.lora ignores the argument and trains plain LoRA).
  void check_network_module() {
    const bool oft = network_module_ && network_module_->second == "networks.oft";
    if (oft && algo_) {
      fail(algo_->first,
           "networks.oft has no algo argument (kohya's OFT module ignores it); "
           "remove algo=" +
               algo_->second);
    }
    if (!oft && !oft_args_.empty()) {
      fail(oft_args_.front(),
           "enable_all_linear / enable_conv are networks.oft arguments: they need "
           "network_module = \"networks.oft\"");
    }
    if (oft) set_key(network_module_->first, "network.algo", quoted("oft"));
    const bool lycoris = network_module_ && network_module_->second == "lycoris.kohya";
    if (lycoris && algo_ && algo_->second == "oft") {  // lorafleet's algo oft is kohya's module
      fail(algo_->first, "LyCORIS's OFT (algo=diag-oft) is " + std::string(not_implemented) +
                             "; kohya's OFT is: network_module = \"networks.oft\"");
    }
    if (lycoris && (!algo_ || algo_->second == "lora")) {
      fail(network_module_->first,
           "'lycoris.kohya' needs network_args \"algo=loha\" or \"algo=lokr\" (LyCORIS's algo "
           "lora, its "
           "LoCon, is " +
               std::string(not_implemented) + "; for LoRA use networks.lora)");
    }
    if (!lycoris && algo_ && algo_->second != "lora") {
      fail(algo_->first, "algo=" + algo_->second +
                             " is a LyCORIS algorithm: it needs network_module = "
                             "\"lycoris.kohya\"");
    }
    if (!lycoris && dora_) {  // kohya's networks.lora ignores it
      fail(*dora_, "dora_wd is a LyCORIS option: it needs network_module = \"lycoris.kohya\"");
    }
  }

  // kohya hands network_args to the network as strings and converts them there; here the key's
  // kind decides how YAML reads the value.
  static std::string network_value(KeyValueKind kind, const std::string& v) {
    if (kind == KeyValueKind::kString || kind == KeyValueKind::kStringList) return quoted(v);
    if (kind == KeyValueKind::kBool && (v == "True" || v == "False")) {
      return v == "True" ? "true" : "false";  // Python's spelling
    }
    const bool plain = !v.empty() && v.find_first_of(":#[]{},&*!|>'\"%@`") == std::string::npos;
    return plain ? v : quoted(v);
  }

  // Whether a value is one of the no-op values "off|1|true" (see KohyaArg::noop).
  static bool is_noop(const toml::node& n, const std::string& spec) {
    std::stringstream ss(spec);
    for (std::string v; std::getline(ss, v, '|');) {
      if (v == "off" ? is_off(n) : same_value(n, v)) return true;
    }
    return false;
  }
  static bool is_off(const toml::node& n) {
    if (const auto* b = n.as_boolean()) return !b->get();
    if (const auto* i = n.as_integer()) return i->get() == 0;
    if (const auto* f = n.as_floating_point()) return f->get() == 0.0;
    if (const auto* s = n.as_string()) return s->get().empty();
    if (const auto* arr = n.as_array()) return arr->empty();
    return false;
  }
  static bool same_value(const toml::node& n, const std::string& v) {
    if (const auto* b = n.as_boolean()) return v == (b->get() ? "true" : "false");
    if (const auto* i = n.as_integer()) return v == std::to_string(i->get());
    if (const auto* f = n.as_floating_point()) return std::stod(v) == f->get();
    if (const auto* s = n.as_string()) return v == s->get();
    return false;
  }

  static constexpr const char* not_implemented = "not implemented in lorafleet yet";
  std::string path_;
  YamlBuilder* out_;
  std::vector<std::string>* warnings_;
  std::optional<std::pair<TomlArg, std::string>> network_module_;  // and the module given
  std::optional<std::pair<TomlArg, std::string>> algo_;            // network_args' algo=...
  std::optional<TomlArg> dora_;                                    // network_args' dora_wd=True
  std::vector<TomlArg> oft_args_;  // network_args enable_all_linear / enable_conv
};

// Every mapping and list of `node` in flow style, so that it is emitted on one line.
void set_flow_style(YAML::Node node) {
  if (!node.IsMap() && !node.IsSequence()) return;
  node.SetStyle(YAML::EmitterStyle::Flow);
  for (auto it = node.begin(); it != node.end(); ++it) {
    set_flow_style(node.IsMap() ? it->second : *it);
  }
}

// The lorafleet job YAML's keys, one line each (a mapping or list value in flow style).
void add_job_yaml(const std::string& text, const std::string& path, YamlBuilder* out) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.is_null() ? 1 : e.mark.line + 1) +
                      ": YAML syntax error: " + e.msg);
  }
  if (root.IsNull()) return;
  auto where = [&path](const YAML::Node& n) {
    return path + ":" + std::to_string(n.Mark().is_null() ? 1 : n.Mark().line + 1);
  };
  auto flow = [](const YAML::Node& v) -> std::string {
    if (v.IsNull()) return "";
    // A quoted scalar stays quoted (the parser refuses a quoted number), a multi-line one
    // becomes one line.
    if (v.IsScalar() && (v.Tag() == "!" || v.Scalar().find('\n') != std::string::npos)) {
      return quoted(v.Scalar());
    }
    YAML::Node copy = YAML::Clone(v);
    set_flow_style(copy);
    YAML::Emitter e;
    e << copy;
    return e.c_str();
  };
  if (!root.IsMap()) {
    throw ConfigError(where(root) + ": expected a mapping of sections (model, dataset, ...)");
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string section = it->first.as<std::string>();
    const YAML::Node v = it->second;
    if (!v.IsMap()) {
      out->add_top(section, flow(v), {where(it->first), ""});
      continue;
    }
    for (auto kv = v.begin(); kv != v.end(); ++kv) {
      out->add(section, kv->first.as<std::string>(), flow(kv->second), {where(kv->first), ""});
    }
  }
}

// "<tag>:<line>: ..." of the generated YAML -> "<file>:<line>: ..." of the argument or key that
// gave the line, naming the kohya argument beside the job key.
std::string pointed_back(const std::string& message, const std::string& tag,
                         const std::vector<Origin>& origins) {
  const std::string prefix = tag + ":";
  if (message.rfind(prefix, 0) != 0) return message;
  std::size_t end = prefix.size();
  while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
  if (end == prefix.size()) return message;
  const std::size_t line = std::stoul(message.substr(prefix.size(), end - prefix.size()));
  if (line < 1 || line > origins.size()) return message;
  const Origin& o = origins[line - 1];
  std::string rest = message.substr(end);
  const std::size_t key = rest.find(": key '");
  if (!o.arg.empty() && key != std::string::npos) {
    rest.insert(key + 2, "kohya argument '" + o.arg + "', ");
  }
  return o.where + rest;
}

std::string read_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  std::ifstream in;
  if (!fs::is_directory(path, ec)) in.open(path, std::ios::binary);
  if (!in.is_open()) throw ConfigError(path + ": cannot read the " + what);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": read error while loading the " + what);
  return text.str();
}

}  // namespace

JobConfig parse_kohya_training_toml(const std::string& toml_text, const std::string& toml_path,
                                    const std::string* job_yaml_text,
                                    const std::string& job_yaml_path, const std::string& base_dir) {
  YamlBuilder yaml;
  std::vector<std::string> warnings;
  KohyaToml reader(toml_path, &yaml, &warnings);
  reader.read(toml_text);
  if (job_yaml_text != nullptr) add_job_yaml(*job_yaml_text, job_yaml_path, &yaml);
  reader.add_kohya_defaults();

  std::vector<Origin> origins;
  const std::string text = yaml.text(&origins);
  const std::string tag = toml_path + " (as job YAML)";
  JobConfig c;
  try {
    c = parse_job_config(text, tag, base_dir);
  } catch (const ConfigError& e) {
    throw ConfigError(pointed_back(e.what(), tag, origins));
  }
  for (std::string& w : c.dataset_warnings) w = pointed_back(w, tag, origins);
  c.dataset_warnings.insert(c.dataset_warnings.begin(), warnings.begin(), warnings.end());
  return c;
}

JobConfig load_kohya_training_config(const std::string& toml_path,
                                     const std::string& job_yaml_path) {
  const std::string path =
      toml_path.size() >= 5 && toml_path.substr(toml_path.size() - 5) == ".toml"
          ? toml_path
          : toml_path + ".toml";
  const std::string toml_text = read_file(path, "kohya training config file (--config_file)");
  std::string yaml_text;
  if (!job_yaml_path.empty()) yaml_text = read_file(job_yaml_path, "job config file (--config)");
  return parse_kohya_training_toml(toml_text, path, job_yaml_path.empty() ? nullptr : &yaml_text,
                                   job_yaml_path, fs::current_path().string());
}

}  // namespace lf
