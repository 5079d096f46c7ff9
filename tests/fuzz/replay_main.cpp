// The replay driver of the fuzz targets for builds without libFuzzer (the default GCC build):
// runs LLVMFuzzerTestOneInput once per file in the folders (or files) given, as libFuzzer does
// when given files. ctest runs it over each target's committed corpus and regression inputs, so
// every crash found once stays fixed without clang.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

namespace fs = std::filesystem;

namespace {

void replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    if (fs::is_directory(arg)) {
      for (const auto& e : fs::recursive_directory_iterator(arg)) {
        if (e.is_regular_file()) {
          replay(e.path());
          ++count;
        }
      }
    } else if (fs::is_regular_file(arg)) {
      replay(arg);
      ++count;
    } else {
      std::fprintf(stderr, "%s: no such file or folder\n", argv[i]);
      return 2;
    }
  }
  if (count == 0) {
    std::fprintf(stderr, "no inputs replayed: give corpus folders or files\n");
    return 2;
  }
  std::printf("replayed %d inputs\n", count);
  return 0;
}
