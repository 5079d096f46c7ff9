// kohya's training TOML (train_network.py arguments) over arbitrary text.
#include <string>

#include "common/config/kohya_training_toml.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string toml(reinterpret_cast<const char*>(data), size);
  try {
    lf::parse_kohya_training_toml(toml, "fuzz.toml", nullptr, "", "/nonexistent-base");
  } catch (const lf::ConfigError&) {
    // "fuzz.toml:<line>: ..." is the documented refusal.
  }
  return 0;
}
