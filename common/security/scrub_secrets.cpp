#include "common/security/scrub_secrets.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace lf {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool names_secret(std::string key) {
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  key.erase(std::remove_if(key.begin(), key.end(),
                           [](char c) { return c == '"' || c == '\'' || c == ' '; }),
            key.end());
  if (ends_with(key, "_file") || ends_with(key, "_path")) return false;
  if (key.find("tokenizer") != std::string::npos) return false;  // tokenizer_vocab, ...
  for (const char* word :
       {"token", "secret", "password", "passwd", "api_key", "apikey", "credential"}) {
    if (key.find(word) != std::string::npos) return true;
  }
  return false;
}

std::string scrub_line(const std::string& line) {
  const std::size_t first = line.find_first_not_of(" \t-");
  if (first == std::string::npos || line[first] == '#') return line;
  const std::size_t sep = line.find_first_of(":=", first);
  if (sep == std::string::npos || !names_secret(line.substr(first, sep - first))) return line;
  const std::size_t value = line.find_first_not_of(" \t", sep + 1);
  if (value == std::string::npos) return line;  // a mapping's header, no value on this line
  return line.substr(0, value) + "<scrubbed>";
}

}  // namespace

std::string scrub_secrets(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    out += scrub_line(line);
    if (!in.eof()) out += '\n';
  }
  if (!text.empty() && text.back() == '\n' && (out.empty() || out.back() != '\n')) out += '\n';
  return out;
}

}  // namespace lf
