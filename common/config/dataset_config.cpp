// kohya dataset-config TOML files ([general], [[datasets]], [[datasets.subsets]]) read with
// toml++, checked key by key against the kohya schema (dataset_keys.h) with the line of every key
// from toml++'s source regions, then resolved like the job YAML's `datasets:` form.
#include "common/config/dataset_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "common/config/dataset_keys.h"
#include "common/config/job_config.h"

namespace lf {
namespace dataset_keys {
namespace {

namespace fs = std::filesystem;

class TomlReader {
 public:
  // text: the file's contents when already read (e.g. sent by the coordinator), else null.
  // image_base: what relative image_dir values resolve against ("" = the current directory).
  TomlReader(std::string path, std::vector<std::string>* warnings, const std::string* text,
             std::string image_base)
      : path_(std::move(path)), warnings_(warnings), text_(text),
        image_base_(std::move(image_base)) {}

  [[noreturn]] void fail(int line, const std::string& message) const {
    throw ConfigError(path_ + ":" + std::to_string(line) + ": " + message);
  }
  [[noreturn]] void fail_key(int line, const std::string& key, const std::string& problem) const {
    fail(line, "key '" + key + "': " + problem);
  }

  static int line_of(const toml::source_region& r, int fallback) {
    return r.begin.line > 0 ? static_cast<int>(r.begin.line) : fallback;
  }

  static std::string describe(const toml::node& n) {
    if (const auto* s = n.as_string()) return "'" + s->get() + "'";
    if (const auto* i = n.as_integer()) return "'" + std::to_string(i->get()) + "'";
    if (const auto* f = n.as_floating_point()) {
      std::ostringstream os;
      os << f->get();
      return "'" + os.str() + "'";
    }
    if (const auto* b = n.as_boolean()) return b->get() ? "'true'" : "'false'";
    if (n.is_array()) return "an array";
    if (n.is_table()) return "a table";
    return "a date or time";
  }

  // The keys of a table in file order (toml++ keeps them sorted by name).
  struct Entry {
    int line;
    int column;
    std::string name;
    const toml::node* node;
  };
  static std::vector<Entry> entries(const toml::table& t, int fallback_line) {
    std::vector<Entry> out;
    for (auto&& [k, v] : t) {
      out.push_back({line_of(k.source(), fallback_line), static_cast<int>(k.source().begin.column),
                     std::string(k.str()), &v});
    }
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
    return out;
  }

  GivenValue convert(const toml::node& n, KeyType type, const std::string& key, int line) const {
    GivenValue g;
    g.line = line;
    g.text = describe(n);
    auto wrong = [&]() {
      fail_key(line, key, "expected " + expected_of(type) + ", got " + g.text);
    };
    auto as_int = [&](const toml::node& e) -> int {
      const auto* i = e.as_integer();
      if (i == nullptr || i->get() < INT_MIN || i->get() > INT_MAX) wrong();
      return static_cast<int>(i->get());
    };
    auto as_number = [&](const toml::node& e) -> double {
      double d = 0;
      if (const auto* i = e.as_integer()) {
        d = static_cast<double>(i->get());
      } else if (const auto* f = e.as_floating_point()) {
        d = f->get();
      } else {
        wrong();
      }
      if (!std::isfinite(d)) fail_key(line, key, "expected a finite number, got " + g.text);
      return d;
    };
    switch (type) {
      case KeyType::kBool:
        if (const auto* b = n.as_boolean()) {
          g.b = b->get();
        } else {
          wrong();
        }
        break;
      case KeyType::kInt:
        g.i = as_int(n);
        break;
      case KeyType::kNumber:
        g.d = as_number(n);
        break;
      case KeyType::kString:
        if (const auto* s = n.as_string()) {
          g.s = s->get();
        } else {
          wrong();
        }
        break;
      case KeyType::kResolution:
        if (n.is_integer()) {
          g.w = g.h = as_int(n);
        } else if (const auto* a = n.as_array(); a != nullptr && a->size() == 2) {
          g.w = as_int(*a->get(0));
          g.h = as_int(*a->get(1));
        } else {
          wrong();
        }
        break;
      case KeyType::kFloatPair:
        if (const auto* a = n.as_array(); a != nullptr && a->size() == 2) {
          g.lo = as_number(*a->get(0));
          g.hi = as_number(*a->get(1));
        } else {
          wrong();
        }
        break;
      case KeyType::kTable:
        if (const auto* t = n.as_table()) {
          g.table_size = t->size();
        } else {
          wrong();
        }
        break;
    }
    return g;
  }

  // Reads the keys of one level; a dataset's `subsets` array is handed back for the caller.
  void read_level(const toml::table& t, Level kind, GivenLevel& level,
                  const toml::array** subsets, int* subsets_line) const {
    for (const Entry& e : entries(t, level.line)) {
      const std::string key = level.path + "." + e.name;
      if (kind == kDataset && e.name == "subsets") {
        const toml::array* a = e.node->as_array();
        if (a == nullptr || !a->is_array_of_tables()) {
          fail_key(e.line, key,
                   "expected an array of tables ([[datasets.subsets]]), got " + describe(*e.node));
        }
        *subsets = a;
        *subsets_line = e.line;
        continue;
      }
      const KeySpec* spec = find_key(e.name, kind);
      if (spec == nullptr) {
        const std::string allowed = allowed_levels_text(e.name, true);
        if (!allowed.empty()) {
          fail_key(e.line, key, "not allowed here (kohya allows " + e.name + " only in: " +
                                    allowed + ")");
        }
        std::string expected;
        for (const auto& n : names_at(kind)) expected += (expected.empty() ? "" : ", ") + n;
        if (kind == kDataset) expected += ", subsets";
        fail(e.line, "unknown key '" + key + "' (expected one of: " + expected + ")");
      }
      store(level, *spec, convert(*e.node, spec->type, key, e.line), warnings_);
    }
  }

  TomlLevels read() const {
    if (text_ == nullptr) {
      std::error_code ec;
      std::ifstream probe;
      if (!fs::is_directory(path_, ec)) probe.open(path_, std::ios::binary);
      if (!probe.is_open()) {
        throw ConfigError(path_ +
                          ": cannot read the kohya dataset config (expected a readable .toml "
                          "file)");
      }
    }
    if (fs::path(path_).extension() == ".json") {
      throw ConfigError(path_ + ": JSON dataset configs are not read by lorafleet (kohya accepts "
                        "them); write the same [general] / [[datasets]] / [[datasets.subsets]] "
                        "tables as a .toml file");
    }
    toml::table root;
    try {
      root = text_ != nullptr ? toml::parse(*text_, path_) : toml::parse_file(path_);
    } catch (const toml::parse_error& e) {
      fail(line_of(e.source(), 1), "TOML syntax error: " + std::string(e.description()));
    }

    // kohya: image_dir as given, i.e. against the current directory.
    const std::string cwd = image_base_.empty() ? fs::current_path().string() : image_base_;
    TomlLevels out;
    out.general.source = path_;
    out.general.path = "general";
    bool any_datasets = false;
    for (const Entry& e : entries(root, 1)) {
      if (e.name == "general") {
        const toml::table* t = e.node->as_table();
        if (t == nullptr) {
          fail_key(e.line, "general", "expected a table ([general]), got " + describe(*e.node));
        }
        out.general.line = e.line;
        read_level(*t, kGeneral, out.general, nullptr, nullptr);
      } else if (e.name == "datasets") {
        const toml::array* a = e.node->as_array();
        if (a == nullptr || !a->is_array_of_tables()) {
          fail_key(e.line, "datasets",
                   "expected an array of tables ([[datasets]]), got " + describe(*e.node));
        }
        any_datasets = !a->empty();
        for (std::size_t i = 0; i < a->size(); ++i) {
          const toml::table& t = *a->get(i)->as_table();
          DatasetLevels dl;
          dl.dataset.source = path_;
          dl.dataset.path = "datasets[" + std::to_string(i) + "]";
          dl.dataset.line = line_of(t.source(), e.line);
          dl.dataset.path_base = cwd;
          const toml::array* subsets = nullptr;
          int subsets_line = dl.dataset.line;
          read_level(t, kDataset, dl.dataset, &subsets, &subsets_line);
          for (std::size_t j = 0; subsets != nullptr && j < subsets->size(); ++j) {
            const toml::table& st = *subsets->get(j)->as_table();
            GivenLevel sl;
            sl.source = path_;
            sl.path = dl.dataset.path + ".subsets[" + std::to_string(j) + "]";
            sl.line = line_of(st.source(), subsets_line);
            sl.path_base = cwd;
            read_level(st, kSubset, sl, nullptr, nullptr);
            dl.subsets.push_back(std::move(sl));
          }
          out.datasets.push_back(std::move(dl));
        }
      } else {
        fail(e.line, "unknown key '" + e.name + "' (expected one of: general, datasets)");
      }
    }
    if (!any_datasets) {
      fail(1, "key 'datasets': expected at least one [[datasets]] table with "
              "[[datasets.subsets]], got none");
    }
    return out;
  }

 private:
  std::string path_;
  std::vector<std::string>* warnings_;
  const std::string* text_;
  std::string image_base_;
};

}  // namespace

TomlLevels read_toml_levels(const std::string& path, std::vector<std::string>* warnings,
                            const std::string* text, const std::string& image_base) {
  return TomlReader(path, warnings, text, image_base).read();
}

}  // namespace dataset_keys

std::vector<DatasetConfig> load_kohya_dataset_toml(const std::string& path,
                                                   const DatasetConfig& defaults,
                                                   std::vector<std::string>* warnings) {
  const dataset_keys::TomlLevels levels = dataset_keys::read_toml_levels(path, warnings);
  return dataset_keys::resolve_datasets(levels.datasets, &levels.general, nullptr, defaults,
                                        "not set in this file: from the job config or the default",
                                        warnings);
}

}  // namespace lf
