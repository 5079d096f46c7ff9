// The kohya dataset-config TOML parser over arbitrary text, through the job YAML that names it
// (as the workers receive it: the text comes with the job, the file need not exist).
#include <string>

#include "common/config/job_config.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

const char* const kJob =
    "model:\n  pretrained_model_name_or_path: /nonexistent/base.safetensors\n"
    "dataset:\n  dataset_config: fuzz.toml\n"
    "output:\n  output_dir: /nonexistent/out\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string toml(reinterpret_cast<const char*>(data), size);
  try {
    lf::parse_job_config(kJob, "fuzz.yaml", "/nonexistent-base", &toml);
  } catch (const lf::ConfigError&) {
    // "fuzz.toml:<line>: ..." or "fuzz.yaml:<line>: ..." is the documented refusal.
  }
  return 0;
}
