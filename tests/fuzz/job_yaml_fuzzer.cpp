// The job YAML parser over arbitrary text: every refusal is a ConfigError naming the source.
#include <string>

#include "common/config/job_config.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    lf::parse_job_config(text, "fuzz.yaml", "/nonexistent-base");
  } catch (const lf::ConfigError& e) {
    lf::fuzz::require(e.what()[0] != '\0', "a config error says what is wrong");
  }
  return 0;
}
