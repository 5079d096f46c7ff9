// Seeded random checkpoint writer (see header).
#include "worker/app/make_checkpoint.h"

#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "worker/core/model/checkpoint.h"
#include "worker/core/model/model_config.h"
#include "worker/io/tensor_file.h"

namespace lf {

int run_make_checkpoint(int argc, char** argv) {
  CLI::App app{"write a seeded random-weight single-file checkpoint (original key layout)"};
  std::string architecture = "tiny";
  std::uint64_t seed = 1234;
  std::string output;
  bool force = false;
  app.add_option("--architecture", architecture, "model preset: tiny | sd15");
  app.add_option("--seed", seed, "weight seed");
  app.add_option("--output", output, "output .safetensors path")->required();
  app.add_flag("--force", force, "overwrite an existing file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (std::filesystem::exists(output) && !force) {
      std::fprintf(stderr, "lorafleet-make-checkpoint: error: %s exists (use --force)\n",
                   output.c_str());
      return 1;
    }
    const ModelPreset preset = model_preset(architecture);
    auto weights = make_random_checkpoint(preset, seed);
    std::map<std::string, at::Tensor> ordered(weights.begin(), weights.end());
    const auto parent = std::filesystem::path(output).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    save_safetensors(output, ordered,
                     {{"format", "pt"},
                      {"lorafleet.architecture", architecture},
                      {"lorafleet.seed", std::to_string(seed)}});
    std::printf("wrote %s (%zu tensors, architecture %s, seed %llu)\n", output.c_str(),
                ordered.size(), architecture.c_str(), static_cast<unsigned long long>(seed));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lorafleet-make-checkpoint: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace lf
