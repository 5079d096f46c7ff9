// The text conditioning of each family: which layer each encoder returns (clip_skip as kohya),
// the concatenated context and SDXL's pooled output; long captions (max_token_length 150 / 225)
// in kohya's 75-token windows, and a training step on SDXL's 227-position context.
#include "worker/train/text_encoder_stack.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/core/lora/lora_network.h"
#include "worker/core/model/sd_models.h"
#include "worker/core/model/unet.h"
#include "worker/core/train/noise_schedule.h"
#include "worker/core/train/seeding.h"
#include "worker/core/train/train_step.h"
#include "worker/train/token_windows.h"

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

// A caption of `words` one-token words.
std::string words(int n) {
  static const char* kWords[] = {"red", "blue", "cat", "dog", "tree", "house", "sky", "car"};
  std::string s;
  for (int i = 0; i < n; ++i) s += std::string(i ? " " : "") + kWords[i % 8];
  return s;
}

TEST(TextEncoderStack, RefusesTokenLengthsKohyaDoesNotOffer) {
  const CLIPTokenizer tok = CLIPTokenizer::from_file(kVocab);
  const ModelPreset p = model_preset("tiny");
  SDModels m = build_sd_models(p, false);
  EXPECT_THROW(TextEncoderStack(p, m.text_encoders, tok, 0, 100), std::invalid_argument);
  EXPECT_THROW(TextEncoderStack(p, m.text_encoders, tok, 0, 300), std::invalid_argument);
  EXPECT_EQ(TextEncoderStack(p, m.text_encoders, tok, 0, 150).max_token_length(), 150);
}

// Short captions fill the further windows with padding windows (BOS then EOS / pad), each
// encoded on its own: the context is 75 n + 2 long, its first window is the 75-token encoding
// and the padding windows' states are those of the padding window alone.
TEST(TextEncoderStack, ShortCaptionsGetPaddingWindowsAsKohya) {
  const CLIPTokenizer tok = CLIPTokenizer::from_file(kVocab);
  torch::NoGradGuard no_grad;
  for (const std::string preset : {"tiny", "tiny-sd2", "tiny-sdxl"}) {
    SCOPED_TRACE(preset);
    const ModelPreset p = model_preset(preset);
    SDModels m = build_sd_models(p, false);
    const std::vector<std::string> caps{"a photo of sks dog", words(100)};
    const TextConditioning c75 =
        TextEncoderStack(p, m.text_encoders, tok, 0, 75).encode(caps, at::Device(at::kCPU));
    for (int length : {150, 225}) {
      TextEncoderStack stack(p, m.text_encoders, tok, 0, length);
      const TextConditioning c = stack.encode(caps, at::Device(at::kCPU));
      const int64_t n = length / 75, width = c75.context.size(2);
      ASSERT_EQ(c.context.sizes(), (std::vector<int64_t>{2, 75 * n + 2, width}));
      // Window 0 is the caption's first 75 tokens framed BOS ... EOS: the 75-token ids, so the
      // same states (also for the truncated 100-token caption) and the same pooled output.
      EXPECT_TRUE(
          torch::allclose(c.context.narrow(1, 0, 76), c75.context.narrow(1, 0, 76), 1e-5, 1e-6));
      if (c.pooled.defined()) {
        EXPECT_TRUE(torch::allclose(c.pooled, c75.pooled, 1e-5, 1e-6));
      }
      // The short caption's further windows: BOS EOS EOS... (pad EOS) or BOS EOS pad... .
      const TextConditioning pad = stack.encode({""}, at::Device(at::kCPU));
      const TextConditioning pad75 =
          TextEncoderStack(p, m.text_encoders, tok, 0, 75).encode({""}, at::Device(at::kCPU));
      for (int64_t k = 1; k < n; ++k) {
        EXPECT_TRUE(torch::allclose(c.context[0].narrow(0, 1 + 75 * k, 75),
                                    pad75.context[0].narrow(0, 1, 75), 1e-5, 1e-6))
            << "window " << k;
      }
      EXPECT_TRUE(torch::allclose(c.context[0][-1], pad75.context[0][-1], 1e-5, 1e-6));
      EXPECT_TRUE(torch::allclose(pad.context[0].narrow(0, 1, 75),
                                  pad75.context[0].narrow(0, 1, 75), 1e-5, 1e-6));
      // The 100-token caption's window 1 holds its tokens 75..99: not padding.
      EXPECT_FALSE(torch::allclose(c.context[1].narrow(0, 76, 25), c.context[0].narrow(0, 76, 25),
                                   1e-3, 1e-3));
    }
  }
}

// kohya trains SDXL with --max_token_length 225: the UNet's cross-attention takes the
// 227-position context, and every position beyond CLIP's 77 moves the loss.
TEST(TextEncoderStack, SdxlTrainStepUsesThe227PositionContext) {
  const CLIPTokenizer tok = CLIPTokenizer::from_file(kVocab);
  const ModelPreset p = model_preset("tiny-sdxl");
  SDModels m = build_sd_models(p, false);
  TextEncoderStack stack(p, m.text_encoders, tok, 0, 225);
  TextConditioning c;
  {
    torch::NoGradGuard no_grad;
    c = stack.encode({words(180), "a photo of sks dog"}, at::Device(at::kCPU));
  }
  ASSERT_EQ(c.context.sizes(), (std::vector<int64_t>{2, 227, 48 + 64}));
  ASSERT_EQ(c.pooled.sizes(), (std::vector<int64_t>{2, 32}));
  at::Generator init = make_cpu_generator(3);
  LoRANetworkOptions options;
  options.network_dim = 4;
  options.network_alpha = 4.0;
  options.train_text_encoder = false;
  LoRANetwork lora(m.unet, unet_lora_naming(m.unet, /*ldm_names=*/true), {}, options, init);
  StepInputs in;
  at::Generator data = make_cpu_generator(4);
  in.latents = torch::randn({2, 4, 8, 8}, data);
  in.context = c.context.clone().requires_grad_(true);
  const torch::Tensor size_cond = torch::tensor({64.f, 64.f, 0.f, 0.f, 64.f, 64.f}).repeat({2, 1});
  in.vector_cond = sdxl_vector_conditioning(c.pooled, size_cond, p.unet.adm_time_embed_dim);
  in.loss_weights = torch::ones({2});
  DDPMNoiseSchedule schedule;
  at::Generator gen = make_cpu_generator(mix_seed(1, 0, 0));
  const torch::Tensor loss = compute_loss_sum(m.unet, schedule, in, gen) / 2.0;
  loss.backward();
  ASSERT_TRUE(std::isfinite(loss.item<double>()));
  const torch::Tensor g = in.context.grad();
  ASSERT_TRUE(g.defined());
  // Positions 77..226 (windows 2 and 3, the last state) reach the loss for both captions.
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_GT(g[b].narrow(0, 77, 150).abs().sum().item<double>(), 0.0) << b;
  }
  double lora_grad = 0.0;
  for (const auto& t : lora.parameters()) {
    if (t.grad().defined()) lora_grad += t.grad().abs().sum().item<double>();
  }
  EXPECT_GT(lora_grad, 0.0);
}

}  // namespace
}  // namespace lf
