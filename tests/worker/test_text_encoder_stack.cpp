// The text conditioning of each family: which layer each encoder returns (clip_skip as kohya),
// the concatenated context and SDXL's pooled output.
#include "worker/train/text_encoder_stack.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "worker/core/model/sd_models.h"

namespace lf {
namespace {

const char* kVocab = LF_SOURCE_DIR "/.deps/bpe_simple_vocab_16e6.txt.gz";

std::vector<int64_t> layers(const std::string& preset, int clip_skip) {
  static const CLIPTokenizer tok = CLIPTokenizer::from_file(kVocab);
  const ModelPreset p = model_preset(preset);
  SDModels m = build_sd_models(p, false);
  return TextEncoderStack(p, m.text_encoders, tok, clip_skip).hidden_layers_from_end();
}

TEST(TextEncoderStack, LayerPerFamilyAndClipSkipAsKohya) {
  EXPECT_EQ(layers("tiny", 0), (std::vector<int64_t>{1}));  // SD1: last layer
  EXPECT_EQ(layers("tiny", 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(layers("tiny", 2), (std::vector<int64_t>{2}));      // penultimate
  EXPECT_EQ(layers("tiny-sd2", 0), (std::vector<int64_t>{2}));  // SD2: penultimate
  EXPECT_EQ(layers("tiny-sd2", 1), (std::vector<int64_t>{2}));  // kohya's 23-layer count
  EXPECT_EQ(layers("tiny-sd2", 2), (std::vector<int64_t>{3}));
  EXPECT_EQ(layers("tiny-sdxl", 0), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(layers("tiny-sdxl", 1), (std::vector<int64_t>{2, 2}));  // ignored, as kohya
  EXPECT_THROW(layers("tiny-sdxl", 2), std::invalid_argument);
  EXPECT_THROW(layers("tiny", 3), std::invalid_argument);  // tiny's encoder has 2 layers
}

TEST(TextEncoderStack, SdxlConcatenatesBothEncodersAndKeepsThePooledBigG) {
  const CLIPTokenizer tok = CLIPTokenizer::from_file(kVocab);
  const ModelPreset p = model_preset("tiny-sdxl");
  SDModels m = build_sd_models(p, false);
  TextEncoderStack stack(p, m.text_encoders, tok, 0);
  torch::NoGradGuard no_grad;
  const TextConditioning c = stack.encode({"a photo of sks dog", ""}, at::Device(at::kCPU));
  EXPECT_EQ(c.context.sizes(), (std::vector<int64_t>{2, 77, 48 + 64}));
  ASSERT_TRUE(c.pooled.defined());
  EXPECT_EQ(c.pooled.sizes(), (std::vector<int64_t>{2, 32}));
  // te1's hidden states are the first 48 channels: the encoder alone at its penultimate layer.
  const std::vector<int> ids = tok.tokenize("a photo of sks dog", 77, 49407);
  const torch::Tensor t = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end())).view({1, 77});
  const CLIPTextOutput te1 = m.text_encoders[0]->forward(t, 2, false);
  EXPECT_TRUE(
      torch::equal(c.context.index({0, torch::indexing::Slice(), torch::indexing::Slice(0, 48)}),
                   te1.hidden[0]));
  const TextConditioning sd1 = [&] {
    const ModelPreset p1 = model_preset("tiny");
    SDModels m1 = build_sd_models(p1, false);
    return TextEncoderStack(p1, m1.text_encoders, tok, 0).encode({"x"}, at::Device(at::kCPU));
  }();
  EXPECT_FALSE(sd1.pooled.defined());  // SD 1.x has no vector conditioning
  // Stopping at the selected layer (no pooled output) gives the same hidden states.
  const CLIPTextOutput full = m.text_encoders[0]->forward(t, 2, false, /*with_pooled=*/true);
  const CLIPTextOutput cut = m.text_encoders[0]->forward(t, 2, false, /*with_pooled=*/false);
  EXPECT_TRUE(torch::equal(full.hidden, cut.hidden));
  EXPECT_FALSE(cut.pooled.defined());
  EXPECT_EQ(sd1.context.sizes(), (std::vector<int64_t>{1, 77, 64}));
}

}  // namespace
}  // namespace lf
