// kohya's long captions (--max_token_length 75 / 150 / 225) against the reference text encoders
// (tests/oracle/make_long_caption_fixture.py: transformers 5.24.0 CLIPTextModel /
// CLIPTextModelWithProjection, the open_clip-layout encoders through diffusers 0.42.1
// convert_open_clip_checkpoint, with kohya's _get_input_ids, encode_tokens /
// _get_hidden_states_sdxl and _pool_workaround restated step by step) on lorafleet's seeded tiny
// checkpoints, fp32 CPU.
//
// Per preset (SD 1.x-, SD 2.x- and SDXL-like) and token length: the window ids of every encoder
// are exactly kohya's, and TextEncoderStack's context (windows joined, encoders concatenated)
// and SDXL's pooled output (the first window's) are within 1e-5 of the reference. SD 1.x also
// with clip_skip 2 in every window. The captions (metadata) cover the empty caption, padding
// windows, the EOS at a window's edge (74 and 75 tokens), 100, 150, 180 and a truncated 300.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "common/text/clip_tokenizer.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/sd_models.h"
#include "oracle_fixture.h"
#include "worker/train/text_encoder_stack.h"
#include "worker/train/token_windows.h"

namespace lf {
namespace {

constexpr double kAtol = 1e-5;  // fp32, the same windows, different kernels / op order
const char* kVocab = LF_SOURCE_DIR "/.deps/bpe_simple_vocab_16e6.txt.gz";

// The window ids lorafleet feeds encoder `spec`: [B * n, 77].
torch::Tensor window_ids(const CLIPTokenizer& tok, const std::vector<std::string>& captions,
                         int length, const TextEncoderSpec& spec) {
  const int pad = static_cast<int>(spec.pad_token);
  std::vector<int64_t> ids;
  for (const std::string& c : captions) {
    const std::vector<int64_t> w =
        kohya_token_windows(tok.tokenize(c, length + 2, pad), CLIPTokenizer::kEndOfText, pad);
    ids.insert(ids.end(), w.begin(), w.end());
  }
  return torch::tensor(ids, torch::kLong).view({-1, kWindowLength});
}

class OracleLongCaptions : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleLongCaptions, KohyasWindowsMatchTheReferenceEncodersWithin1e5) {
  const std::string name = GetParam();
  test::OracleFixture fx(test::kOracleFixtureDir + "long_captions_" + name + ".safetensors");
  ASSERT_EQ(fx.meta("preset"), name);
  const uint64_t seed = std::stoull(fx.meta("checkpoint_seed"));
  const ModelPreset preset = model_preset(name);
  const auto weights = make_random_checkpoint(preset, seed);
  ASSERT_EQ(test::random_checkpoint_sha256(name, weights, seed), fx.meta("checkpoint_sha256"))
      << "make_random_checkpoint(\"" << name << "\", " << seed << ") no longer produces the "
      << "checkpoint the fixture was made from: run tests/oracle/regen.sh";
  const auto captions = nlohmann::json::parse(fx.meta("captions")).get<std::vector<std::string>>();
  ASSERT_EQ(captions.size(), 8u);

  torch::NoGradGuard no_grad;
  std::printf("[%s]\n", name.c_str());
  SDModels models = build_sd_models(preset, /*with_decoder=*/false);
  load_sd_models(models, weights);
  const CLIPTokenizer tok = CLIPTokenizer::from_file(kVocab);
  for (const int length : {75, 150, 225}) {
    const std::string key = "L" + std::to_string(length);
    for (std::size_t i = 0; i < preset.text_encoders.size(); ++i) {
      const std::string ids = key + ".te" + std::to_string(i) + ".input_ids";
      EXPECT_TRUE(
          torch::equal(window_ids(tok, captions, length, preset.text_encoders[i]), fx.get(ids)))
          << ids;
    }
    TextEncoderStack stack(preset, models.text_encoders, tok, /*clip_skip=*/0, length);
    const TextConditioning c = stack.encode(captions, at::Device(at::kCPU));
    EXPECT_EQ(c.context.size(1), context_length(length));
    test::expect_close(fx, key + ".context", c.context, kAtol);
    if (preset.family == ModelFamily::kSDXL)
      test::expect_close(fx, key + ".pooled", c.pooled, kAtol);
  }
  if (preset.family == ModelFamily::kSD1) {
    TextEncoderStack stack(preset, models.text_encoders, tok, /*clip_skip=*/2, 225);
    test::expect_close(fx, "L225.clip_skip2.context",
                       stack.encode(captions, at::Device(at::kCPU)).context, kAtol);
  }
  EXPECT_EQ(fx.unused(), std::vector<std::string>{})
      << "fixture tensors no comparison used (extend this test for them)";
}

INSTANTIATE_TEST_SUITE_P(Presets, OracleLongCaptions,
                         ::testing::Values("tiny", "tiny-sd2", "tiny-sdxl"), [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace lf
