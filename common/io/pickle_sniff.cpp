// Pickle sniffing (see header).
#include "common/io/pickle_sniff.h"

#include <cstdio>

namespace lf {

bool looks_like_pickle(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char b[4] = {0, 0, 0, 0};
  const size_t n = std::fread(b, 1, sizeof(b), f);
  std::fclose(f);
  if (n >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 0x03 && b[3] == 0x04) return true;
  return n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5;
}

}  // namespace lf
