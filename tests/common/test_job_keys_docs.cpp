// docs/configuration.md against the key declarations (job_keys.h, dataset_keys.h): every table
// under a `## <section>` heading lists exactly that section's keys, each documented default
// equals the declared one, every allowed value of a one-of key appears in its row, and every
// kohya dataset key lorafleet accepts only at its no-op value is named on the page.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/config/dataset_keys.h"
#include "common/config/job_keys.h"

namespace lf {
namespace {

struct DocRow {
  std::vector<std::string> keys;      // the backticked names of the first cell
  std::vector<std::string> defaults;  // the backticked values of the second cell
  std::string meaning;
  int line = 0;
};

std::vector<std::string> backticked(const std::string& cell) {
  std::vector<std::string> out;
  static const std::regex re("`([^`]*)`");
  for (auto it = std::sregex_iterator(cell.begin(), cell.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::string cell;
  for (std::size_t i = 1; i < row.size(); ++i) {  // row[0] is the leading '|'
    if (row[i] == '|') {
      out.push_back(cell);
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return out;
}

struct Doc {
  std::map<std::string, std::vector<DocRow>> rows;  // `## section` -> its table rows
  std::string text;
};

Doc read_doc() {
  const std::string path = std::string(LF_SOURCE_DIR) + "/docs/configuration.md";
  std::ifstream in(path);
  EXPECT_TRUE(in.is_open()) << path;
  Doc doc;
  std::string line, section;
  for (int n = 1; std::getline(in, line); ++n) {
    doc.text += line + "\n";
    if (line.rfind("## ", 0) == 0) section = line.substr(3);
    if (line.rfind("| `", 0) != 0) continue;
    const std::vector<std::string> c = cells(line);
    if (c.size() < 3) continue;
    doc.rows[section].push_back({backticked(c[0]), backticked(c[1]), c[2], n});
  }
  return doc;
}

// A documented default equals the declared one: numerically when both are numbers, else as
// text ("" is written `""`).
bool same_default(const std::string& documented, const std::string& declared) {
  if (documented == "\"\"") return declared.empty();
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double a = std::strtod(documented.c_str(), &end_a);
  const double b = std::strtod(declared.c_str(), &end_b);
  if (!documented.empty() && !declared.empty() && *end_a == '\0' && *end_b == '\0') return a == b;
  return documented == declared;
}

TEST(JobKeysDocs, EachSectionTableListsExactlyItsDeclaredKeys) {
  const Doc doc = read_doc();
  std::map<std::string, std::set<std::string>> declared;
  for (const JobKeyInfo& k : job_keys()) declared[k.section].insert(k.name);
  for (const dataset_keys::KeySpec& k : dataset_keys::all_keys()) {
    if (k.supported && k.canonical == nullptr) declared["dataset"].insert(k.name);
  }
  ASSERT_EQ(declared.size(),
            8u);  // model dataset network training output coordinator worker cluster
  for (const auto& [section, names] : declared) {
    std::set<std::string> documented;
    for (const DocRow& r : doc.rows.at(section)) documented.insert(r.keys.begin(), r.keys.end());
    EXPECT_EQ(documented, names) << "## " << section << " of docs/configuration.md";
  }
}

TEST(JobKeysDocs, DocumentedDefaultsAndChoicesAreTheDeclaredOnes) {
  const Doc doc = read_doc();
  int compared = 0;
  for (const JobKeyInfo& k : job_keys()) {
    const DocRow* row = nullptr;
    std::size_t index = 0;
    for (const DocRow& r : doc.rows.at(k.section)) {
      for (std::size_t i = 0; i < r.keys.size(); ++i) {
        if (r.keys[i] == k.name) row = &r, index = i;
      }
    }
    ASSERT_NE(row, nullptr) << k.section << "." << k.name;
    const std::string where =
        "docs/configuration.md:" + std::to_string(row->line) + ": " + k.section + "." + k.name;
    // An empty or unset default is described in words ("none", "unset", "(required)").
    if (k.has_default && !k.default_text.empty()) {
      ASSERT_FALSE(row->defaults.empty()) << where << ": no `default` written";
      const std::string& documented =
          row->defaults.size() == row->keys.size() ? row->defaults[index] : row->defaults[0];
      EXPECT_TRUE(same_default(documented, k.default_text))
          << where << ": documented default " << documented << ", declared " << k.default_text;
      ++compared;
    }
    for (const std::string& choice : k.rule.choices()) {
      EXPECT_NE(row->meaning.find("`" + choice + "`"), std::string::npos)
          << where << ": the allowed value `" << choice << "` is not in its row";
    }
  }
  EXPECT_GE(compared, 50);
}

TEST(JobKeysDocs, KohyaKeysAcceptedOnlyAtTheirNoOpValueAreNamed) {
  const Doc doc = read_doc();
  for (const dataset_keys::KeySpec& k : dataset_keys::all_keys()) {
    if (k.supported) continue;
    EXPECT_NE(doc.text.find(std::string("`") + k.name + "`"), std::string::npos) << k.name;
  }
}

TEST(JobKeysDocs, SameDefaultComparesNumbersByValue) {
  EXPECT_TRUE(same_default("1e-4", "0.0001"));
  EXPECT_TRUE(same_default("2", "2.0"));
  EXPECT_FALSE(same_default("1.0", "1.5"));
  EXPECT_TRUE(same_default("\"\"", ""));
  EXPECT_FALSE(same_default("cosine", "linear"));
}

}  // namespace
}  // namespace lf
