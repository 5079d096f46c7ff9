// What every fuzz target in tests/fuzz shares: the libFuzzer entry point's signature and a way
// to report a broken contract. A target catches exactly the errors its parser documents; any
// other exception escapes and aborts, so libFuzzer (or the replay driver) reports the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace lf::fuzz {

// A documented property does not hold for this input: abort (a finding).
inline void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "fuzz contract violated: %s\n", what);
    std::abort();
  }
}

}  // namespace lf::fuzz
