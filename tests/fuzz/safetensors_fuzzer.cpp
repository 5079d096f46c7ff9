// The safetensors reader over arbitrary bytes: the header length, the JSON header, dtypes,
// shapes and data offsets. Every accepted file's tensors must lie inside the buffer.
#include <stdexcept>
#include <vector>

#include "common/io/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const lf::SafetensorsFile file =
        lf::SafetensorsFile::from_bytes(std::vector<std::uint8_t>(data, data + size), "fuzz");
    volatile std::uint8_t sink = 0;
    for (const lf::TensorInfo& t : file.tensors()) {
      lf::fuzz::require(t.begin <= t.end && t.end <= size, "a tensor's bytes lie in the file");
      lf::fuzz::require(file.find(t.name) != nullptr, "every listed tensor can be found");
      const std::uint8_t* p = file.data(t);
      for (std::uint64_t i = 0; i < t.nbytes(); ++i) sink = sink ^ p[i];  // ASan checks reads
    }
  } catch (const std::runtime_error&) {
    // "fuzz: invalid safetensors: ..." is the documented refusal.
  }
  return 0;
}
