// kohya's sample prompt files (.txt with --n/--w/--h/--d/--l/--s/--ss, .toml, .json) over
// arbitrary text; the first byte picks the format.
#include <stdexcept>
#include <string>

#include "common/config/sample_prompts.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static const char* const kNames[] = {"fuzz.txt", "fuzz.toml", "fuzz.json"};
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    for (const lf::SamplePrompt& p : lf::parse_sample_prompts(text, kNames[data[0] % 3])) {
      lf::fuzz::require(p.width >= 64 && p.width % 8 == 0 && p.height >= 64 && p.height % 8 == 0,
                        "sizes are multiples of 8, at least 64");
      lf::fuzz::require(p.sample_steps >= 1 && p.sample_steps <= 1000, "steps in [1, 1000]");
    }
  } catch (const std::runtime_error&) {
    // "<path>:<line>: <problem>" is the documented refusal.
  }
  return 0;
}
