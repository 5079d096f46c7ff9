// Full-size SD 2.x networks built for real (bfloat16 parameters to halve the memory):
// parameter counts against diffusers and the defining key shapes. Separate from the tiny-model
// tests because each build spends ~10-25 s initialising parameters.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "model/clip_text_model.h"
#include "model/model_config.h"
#include "model/unet.h"

namespace lf {
namespace {

// Builds parameters in bfloat16 for the guard's lifetime (half the memory of fp32).
class Bf16Default {
 public:
  Bf16Default() : saved_(torch::get_default_dtype()) {
    torch::set_default_dtype(caffe2::TypeMeta::Make<at::BFloat16>());
  }
  ~Bf16Default() { torch::set_default_dtype(saved_); }

 private:
  caffe2::TypeMeta saved_;
};

int64_t parameter_count(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// Counts verified with diffusers 0.42.1 on the meta device:
//   with torch.device("meta"): UNet2DConditionModel(cross_attention_dim=1024,
//     attention_head_dim=[5,10,20,20], use_linear_projection=True)            -> 865,910,724
//   UNet2DConditionModel(cross_attention_dim=2048, attention_head_dim=[5,10,20],
//     block_out_channels=[320,640,1280], down_block_types=[Down, CrossAttnDown, CrossAttnDown],
//     up_block_types=[CrossAttnUp, CrossAttnUp, Up], transformer_layers_per_block=[1,2,10],
//     use_linear_projection=True, addition_embed_type="text_time",
//     addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816) -> 2,567,463,684
TEST(FullPresets, SD2UNetParameterCountMatchesDiffusers) {
  Bf16Default bf16;
  UNetModel sd2(model_preset("sd2").unet);
  EXPECT_EQ(parameter_count(*sd2), 865910724);
  auto params = sd2->named_parameters();
  EXPECT_EQ(params["input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight"].sizes(),
            torch::IntArrayRef({320, 1024}));
  EXPECT_EQ(params["input_blocks.1.1.proj_in.weight"].sizes(), torch::IntArrayRef({320, 320}));
  EXPECT_TRUE(params.contains("output_blocks.2.1.conv.weight"));  // no attention at level 3
}

// transformers 5.24 / diffusers 0.42.1 on the meta device: CLIPTextModel(CLIPTextConfig(
// hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12))
// -> 123,060,480; CLIPTextModelWithProjection(hidden 1024, MLP 4096, 24 layers, 16 heads, gelu,
// projection 1024) -> 354,032,640; the same with 1280 / 5120 / 32 / 20 / 1280 -> 694,659,840;
// AutoencoderKL(block_out_channels=(128,256,512,512), layers_per_block=2, 4 down/up blocks)
// -> 83,653,863 (encoder + decoder + quant convs).
TEST(FullPresets, SD2TextEncoderParameterCountMatchesTransformers) {
  // SD 1.5 and SDXL (CLIP-L, bigG, the VAE) are compared with the oracle's reference counts in
  // test_oracle_full_size.cpp; SD 2.x's ViT-H is checked here.
  Bf16Default bf16;
  EXPECT_EQ(parameter_count(*CLIPTextModel(model_preset("sd2").text_encoders.at(0).config)),
            354032640);
}

}  // namespace
}  // namespace lf
