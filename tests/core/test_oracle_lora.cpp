// A LoRA trained by lorafleet, applied by lorafleet and by diffusers' kohya-LoRA loader
// (tests/oracle/make_lora_fixture.py: StableDiffusionPipeline.load_lora_weights, diffusers
// 0.42.1 + peft 0.21.2, which consumed every key of the file) gives the same UNet output, fp32
// CPU, max |lorafleet - diffusers| <= 1e-4; without the LoRA both give the base output.
//
// The LoRA file (tests/fixtures/oracle/lora_<case>.safetensors) is the trainer's own output
// (lorafleet-coordinator + lorafleet-worker on the job lora_<case>.yaml, run by
// tests/oracle/regen.sh). Here it is loaded through load_network_weights, the loader of the
// job's network.network_weights, into a LoRANetwork over the base that regen.sh trained on:
// make_random_checkpoint(preset, seed) again, checked byte for byte by SHA-256 (as
// test_oracle_parity.cpp does). The file's SHA-256 is checked against the fixture too, so the
// expected outputs belong to exactly this file. The module count must equal the number of LoRA
// layers diffusers injected, and every fixture tensor must be consumed by a comparison.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/io/sha256.h"
#include "lora/lora_network.h"
#include "model/checkpoint.h"
#include "model/clip_text_model.h"
#include "model/model_config.h"
#include "model/sd_models.h"
#include "model/unet.h"
#include "oracle_fixture.h"
#include "train/seeding.h"
#include "worker/io/lora_file.h"
#include "worker/io/tensor_file.h"

namespace lf {
namespace {

constexpr double kAtol = 1e-4;  // fp32, same inputs, different kernels / op order
const std::string& kFixtureDir = test::kOracleFixtureDir;

struct LoRACase {
  std::string name;    // fixtures lora_<name>.safetensors / lora_<name>_expected.safetensors
  std::string preset;  // model_preset() of the base; kohya's UNet names (diffusers for SD 1.x/2.x,
                       // ldm for SDXL), the text encoders and their layer rules follow from it
};

// One line per trained LoRA (tests/fixtures/oracle/lora_<name>.yaml).
const std::vector<LoRACase>& cases() {
  // tiny-fp16 / tiny-bf16: tiny's job with output.save_precision fp16 / bf16.
  static const std::vector<LoRACase> all = {{"tiny", "tiny"},           {"tiny-sd2", "tiny-sd2"},
                                            {"tiny-sdxl", "tiny-sdxl"}, {"tiny-fp16", "tiny"},
                                            {"tiny-bf16", "tiny"}};
  return all;
}

// diffusers' module count for a component ("unet", "text_encoder", "text_encoder_2"), 0 when the
// file has none.
size_t diffusers_modules(const test::OracleFixture& fx, const std::string& component) {
  const std::string v = fx.meta(component + "_modules");
  return v.empty() ? 0 : std::stoul(v);
}

void PrintTo(const LoRACase& c, std::ostream* os) { *os << "lora_" << c.name; }

class OracleLoRA : public ::testing::TestWithParam<LoRACase> {};

TEST_P(OracleLoRA, TrainedLoRAMatchesDiffusersKohyaLoaderWithin1e4) {
  const LoRACase& c = GetParam();
  const std::string lora_path = kFixtureDir + "lora_" + c.name + ".safetensors";
  test::OracleFixture fx(kFixtureDir + "lora_" + c.name + "_expected.safetensors");
  ASSERT_EQ(fx.meta("preset"), c.preset);
  ASSERT_EQ(sha256_file_hex(lora_path), fx.meta("lora_sha256"))
      << lora_path << " is not the file the diffusers fixture was made from: run "
      << "tests/oracle/regen.sh";

  // save_precision cases: the file diffusers consumed holds half tensors and float32 alphas.
  if (c.name == "tiny-fp16" || c.name == "tiny-bf16") {
    const at::ScalarType half = c.name == "tiny-fp16" ? at::kHalf : at::kBFloat16;
    std::size_t alphas = 0;
    for (const auto& [name, t] : load_safetensors(lora_path, false, kKeepStoredDtype).tensors) {
      const bool alpha = name.size() > 6 && name.compare(name.size() - 6, 6, ".alpha") == 0;
      alphas += alpha;
      EXPECT_EQ(t.scalar_type(), alpha ? at::kFloat : half) << name;
    }
    EXPECT_GT(alphas, 0u);
  }
  // The trainer's ss_network_dim / ss_network_alpha describe the tensors it wrote.
  if (!fx.meta("lora_ss_network_dim").empty()) {
    EXPECT_EQ(std::stoll(fx.meta("lora_ss_network_dim")), std::stoll(fx.meta("lora_network_dim")));
    EXPECT_EQ(std::stod(fx.meta("lora_ss_network_alpha")),
              std::stod(fx.meta("lora_network_alpha")));
  }

  const uint64_t seed = std::stoull(fx.meta("checkpoint_seed"));
  const ModelPreset preset = model_preset(c.preset);
  const auto weights = make_random_checkpoint(preset, seed);
  ASSERT_EQ(test::random_checkpoint_sha256(c.preset, weights, seed), fx.meta("checkpoint_sha256"))
      << "make_random_checkpoint(\"" << c.preset << "\", " << seed << ") no longer produces the "
      << "base the LoRA fixture was made from: run tests/oracle/regen.sh";

  torch::NoGradGuard no_grad;
  std::printf("[lora_%s]\n", c.name.c_str());
  SDModels models = build_sd_models(preset, /*with_decoder=*/false);
  load_sd_models(models, weights);
  UNetModel& unet = models.unet;
  const std::vector<LoRATextEncoderTarget> targets = kohya_text_encoder_targets(models);
  // Encoders the file has modules for: make_lora_fixture.py stores te{i}.* exactly for those.
  const std::vector<std::string> te_components = {"text_encoder", "text_encoder_2"};
  size_t te_modules = 0;
  for (size_t i = 0; i < preset.text_encoders.size(); ++i) {
    te_modules += diffusers_modules(fx, te_components[i]);
    EXPECT_EQ(fx.has("te" + std::to_string(i) + ".hidden_lora"),
              diffusers_modules(fx, te_components[i]) > 0);
  }

  const torch::Tensor& x = fx.get("unet.x");
  const torch::Tensor& t = fx.get("unet.t");
  const torch::Tensor& context = fx.get("unet.context");
  torch::Tensor y;  // SDXL's vector conditioning, as the parity test builds it
  if (preset.unet.adm_in_channels > 0) {
    y = sdxl_vector_conditioning(fx.get("unet.pooled"), fx.get("unet.time_ids"),
                                 preset.unet.adm_time_embed_dim);
  }
  auto run_texts = [&](const std::string& suffix) {
    for (size_t i = 0; i < preset.text_encoders.size(); ++i) {
      const std::string te = "te" + std::to_string(i);
      if (!fx.has(te + ".hidden_" + suffix)) continue;
      const TextEncoderSpec& spec = preset.text_encoders[i];
      test::expect_close(fx, te + ".hidden_" + suffix,
                         models.text_encoders[i]
                             ->forward(fx.get(te + ".input_ids"), spec.hidden_layer_from_end,
                                       spec.apply_final_layer_norm)
                             .hidden,
                         kAtol);
    }
  };
  {
    LoRANetworkOptions options;
    options.network_dim = std::stoll(fx.meta("lora_network_dim"));
    options.network_alpha = std::stod(fx.meta("lora_network_alpha"));
    options.conv_dim = std::stoll(fx.meta("lora_conv_dim"));
    options.conv_alpha = std::stod(fx.meta("lora_conv_alpha"));
    options.train_unet = diffusers_modules(fx, "unet") > 0;
    options.train_text_encoder = te_modules > 0;
    at::Generator gen = make_cpu_generator(0);  // the fresh init is overwritten by the file
    LoRANetwork lora(unet, unet_lora_naming(unet, preset.family == ModelFamily::kSDXL),
                     options.train_text_encoder ? targets : std::vector<LoRATextEncoderTarget>{},
                     options, gen);
    const LoRALoadReport report = load_network_weights(lora, lora_path);
    // Both sides see the same modules: every module of ours came from the file (none kept its
    // fresh init), and diffusers injected as many LoRA layers as we have.
    EXPECT_EQ(report.missing_modules, std::vector<std::string>{});
    EXPECT_EQ(report.loaded_modules, lora.module_names().size());
    EXPECT_EQ(lora.module_names().size(), diffusers_modules(fx, "unet") + te_modules);
    std::printf("  %zu modules loaded (diffusers: unet %zu, text encoders %zu)\n",
                report.loaded_modules, diffusers_modules(fx, "unet"), te_modules);

    const torch::Tensor with_lora = unet->forward(x, t, context, y);
    test::expect_close(fx, "unet.out_lora", with_lora, kAtol);
    // The comparison above is only worth something if the LoRA moves the output well beyond
    // the tolerance (make_lora_fixture.py asserts > 1e-3 on its side too).
    EXPECT_GT(test::max_abs_diff(with_lora, fx.get("unet.out_base")), 100 * kAtol);
    run_texts("lora");
  }
  // ~LoRANetwork detached the adapters: the bare base again.
  test::expect_close(fx, "unet.out_base", unet->forward(x, t, context, y), kAtol);
  run_texts("base");

  EXPECT_EQ(fx.unused(), std::vector<std::string>{})
      << "fixture tensors no comparison used (extend this test for them)";
}

INSTANTIATE_TEST_SUITE_P(Cases, OracleLoRA, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string n = info.param.name;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
});

}  // namespace
}  // namespace lf
