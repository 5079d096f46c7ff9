// Seeded random checkpoint writer (see header).
#include "worker/app/make_checkpoint.h"

#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "common/io/atomic_file.h"
#include "worker/core/model/checkpoint.h"
#include "worker/core/model/model_config.h"
#include "worker/io/tensor_file.h"

namespace lf {

int run_make_checkpoint(int argc, char** argv) {
  CLI::App app{"write a seeded random-weight single-file checkpoint (original key layout)"};
  std::string preset_name = "tiny";
  std::uint64_t seed = 1234;
  std::string output;
  std::string dtype_name = "fp32";
  bool keys_only = false;
  bool force = false;
  std::string names;
  for (const auto& n : model_preset_names()) names += (names.empty() ? "" : " | ") + n;
  app.add_option("--preset,--architecture", preset_name, "model preset: " + names);
  app.add_option("--seed", seed, "weight seed");
  app.add_option("--output", output, "output path (.safetensors, or text with --keys-only)")
      ->required();
  app.add_option("--dtype", dtype_name, "weight dtype: fp32 | fp16 | bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_flag("--keys-only", keys_only, "write sorted 'key<TAB>d0,d1,...' lines, no weights");
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
    const ModelPreset preset = model_preset(preset_name);
    const auto parent = std::filesystem::path(output).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    if (keys_only) {
      const KeyShapes shapes = random_checkpoint_key_shapes(preset);  // std::map: sorted
      std::string text;
      for (const auto& kv : shapes) {
        text += kv.first + "\t";
        for (size_t i = 0; i < kv.second.size(); ++i) {
          text += (i ? "," : "") + std::to_string(kv.second[i]);
        }
        text += "\n";
      }
      write_file_atomic(output, text);
      std::printf("wrote %s (%zu keys, preset %s)\n", output.c_str(), shapes.size(),
                  preset_name.c_str());
      return 0;
    }
    const at::ScalarType dtype = dtype_name == "fp16"   ? at::kHalf
                                 : dtype_name == "bf16" ? at::kBFloat16
                                                        : at::kFloat;
    auto weights = make_random_checkpoint(preset, seed, dtype);
    std::map<std::string, at::Tensor> ordered(weights.begin(), weights.end());
    weights.clear();
    save_safetensors(output, ordered, random_checkpoint_metadata(preset_name, seed));
    std::printf("wrote %s (%zu tensors, preset %s, %s, seed %llu)\n", output.c_str(),
                ordered.size(), preset_name.c_str(), dtype_name.c_str(),
                static_cast<unsigned long long>(seed));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lorafleet-make-checkpoint: error: %s\n", e.what());
    return 1;
  }
}

std::map<std::string, std::string> random_checkpoint_metadata(const std::string& preset_name,
                                                              uint64_t seed) {
  return {{"format", "pt"},
          {"lorafleet.architecture", preset_name},
          {"lorafleet.family", family_name(model_preset(preset_name).family)},
          {"lorafleet.seed", std::to_string(seed)}};
}

}  // namespace lf
