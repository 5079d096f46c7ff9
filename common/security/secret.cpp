// Secret and PEM file reading (see secret.h). Files are read in binary so a CRLF-terminated
// token written on Windows still trims to the same value.
#include "common/security/secret.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace lf {
namespace {

std::string read_whole_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path + " (" + what + "): " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path + " (" + what + "): read error");
  return text.str();
}

std::string trim(const std::string& s) {
  const char* space = " \t\r\n\v\f";
  const std::size_t first = s.find_first_not_of(space);
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

bool printable_ascii(const std::string& s) {
  for (const char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

std::string read_secret_file(const std::string& path, const std::string& what) {
  const std::string token = trim(read_whole_file(path, what));
  if (token.empty()) {
    throw std::runtime_error(path + " (" + what + "): expected a job token, got an empty file");
  }
  if (!printable_ascii(token)) {
    throw std::runtime_error(path + " (" + what +
                             "): expected a token of printable ASCII characters without inner "
                             "spaces (e.g. `openssl rand -hex 32`)");
  }
  return token;
}

std::string secret_from_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return "";
  const std::string token = trim(value);
  if (!printable_ascii(token)) {
    throw std::runtime_error(std::string("environment variable ") + name +
                             ": expected a token of printable ASCII characters without inner "
                             "spaces (e.g. `openssl rand -hex 32`)");
  }
  return token;
}

std::string read_pem_file(const std::string& path, const std::string& what) {
  std::string text = read_whole_file(path, what);
  if (text.empty()) {
    throw std::runtime_error("cannot read " + path + " (" + what +
                             "): expected a PEM file, got an empty file");
  }
  return text;
}

}  // namespace lf
