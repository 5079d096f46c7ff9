// SDXL / SD2 UNet wiring (per-level transformer depth, label_emb, upsample index), the SDXL
// vector conditioning, the full-size parameter counts, and the LoRA-compatible ResBlock convs.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include <torch/torch.h>

#include "core_test_util.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "model_references.h"

namespace lf {
namespace {

torch::Tensor xl_y() {
  torch::Tensor pooled = test::reference_values("xl.pooled", {2, 32});
  torch::Tensor time_ids = test::from_array(ref::kUNetTinyXLTimeIds, ref::kUNetTinyXLTimeIds_shape);
  return sdxl_vector_conditioning(pooled, time_ids, 256);
}

TEST(UNetSDXL, TinyKeySetEqualsDiffusersDerivedLdmKeys) {
  UNetModel unet(model_preset("tiny-sdxl").unet);
  const std::vector<std::string> names = test::parameter_names(*unet);
  const std::vector<std::string> expected(std::begin(ref::kUNetTinyXLKeys),
                                          std::end(ref::kUNetTinyXLKeys));
  EXPECT_EQ(names, expected);
  const std::set<std::string> keys(names.begin(), names.end());
  // Level 0 has no attention: input_blocks.1 is a bare ResBlock, and so are output_blocks.4/5.
  EXPECT_FALSE(keys.count("input_blocks.1.1.norm.weight"));
  EXPECT_FALSE(keys.count("output_blocks.5.1.norm.weight"));
  EXPECT_TRUE(keys.count("input_blocks.5.1.transformer_blocks.1.attn2.to_k.weight"));   // depth 2
  EXPECT_FALSE(keys.count("input_blocks.3.1.transformer_blocks.1.attn2.to_k.weight"));  // depth 1
  EXPECT_TRUE(keys.count("middle_block.1.transformer_blocks.1.ff.net.2.weight"));
  EXPECT_TRUE(keys.count("output_blocks.1.2.conv.weight"));  // attention level: index 2
  EXPECT_TRUE(keys.count("label_emb.0.0.weight"));
  EXPECT_EQ(unet->named_parameters()["label_emb.0.0.weight"].sizes(),
            torch::IntArrayRef({128, 1568}));
  EXPECT_EQ(unet->named_parameters()["input_blocks.3.1.proj_in.weight"].sizes(),
            torch::IntArrayRef({64, 64}));  // linear projection
}

TEST(UNetSDXL, TinyOutputMatchesDiffusersWithin1e5) {
  UNetModel unet(model_preset("tiny-sdxl").unet);
  test::fill_reference_weights(*unet);
  torch::NoGradGuard no_grad;
  torch::Tensor x = test::reference_values("xl.x", {2, 4, 8, 8});
  torch::Tensor ctx = test::reference_values("xl.context", {2, 7, 112});
  torch::Tensor y = xl_y();
  ASSERT_EQ(y.sizes(), torch::IntArrayRef({2, 1568}));
  torch::Tensor out = unet->forward(x, torch::tensor({10, 981}), ctx, y);
  torch::Tensor expected = test::from_array(ref::kUNetTinyXLOutput, ref::kUNetTinyXLOutput_shape);
  ASSERT_EQ(out.sizes(), expected.sizes());
  EXPECT_GT(expected.abs().max().item<double>(), 0.5);
  EXPECT_LT(test::max_abs_diff(out, expected), 1e-5);
  // y matters: another size conditioning changes the output.
  torch::Tensor other = unet->forward(x, torch::tensor({10, 981}), ctx, y.flip(0));
  EXPECT_GT(test::max_abs_diff(other, out), 1e-3);
}

TEST(UNetSDXL, YIsRequiredExactlyWhenTheModelHasLabelEmb) {
  UNetModel xl(model_preset("tiny-sdxl").unet);
  UNetModel sd1(model_preset("tiny").unet);
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::zeros({2, 4, 8, 8});
  torch::Tensor t = torch::tensor({1, 2});
  EXPECT_THROW(xl->forward(x, t, torch::zeros({2, 3, 112})), std::invalid_argument);
  EXPECT_THROW(xl->forward(x, t, torch::zeros({2, 3, 112}), torch::zeros({2, 1567})),
               std::invalid_argument);
  EXPECT_EQ(xl->forward(x, t, torch::zeros({2, 3, 112}), torch::zeros({2, 1568})).sizes(),
            torch::IntArrayRef({2, 4, 8, 8}));
  EXPECT_THROW(sd1->forward(x, t, torch::zeros({2, 3, 64}), torch::zeros({2, 8})),
               std::invalid_argument);
}

TEST(UNetSDXL, VectorConditioningIsPooledThenCosSinOfEachScalar) {
  torch::Tensor pooled = torch::tensor({{0.5f, -0.25f}});
  const std::vector<double> scalars = {1024, 768, 0, 16, 1024, 960};
  torch::Tensor size_cond =
      torch::tensor(std::vector<float>(scalars.begin(), scalars.end())).reshape({1, 6});
  const int64_t dim = 8, half = 4;
  torch::Tensor y = sdxl_vector_conditioning(pooled, size_cond, dim);
  ASSERT_EQ(y.sizes(), torch::IntArrayRef({1, 2 + 6 * dim}));
  EXPECT_EQ(y[0][0].item<float>(), 0.5f);
  EXPECT_EQ(y[0][1].item<float>(), -0.25f);
  for (int64_t s = 0; s < 6; ++s) {
    for (int64_t k = 0; k < half; ++k) {
      const double arg = scalars[s] * std::exp(-std::log(10000.0) * k / half);
      // float32 arguments up to 1024 carry ~1e-4 absolute phase error.
      EXPECT_NEAR(y[0][2 + s * dim + k].item<double>(), std::cos(arg), 2e-4) << s << "," << k;
      EXPECT_NEAR(y[0][2 + s * dim + half + k].item<double>(), std::sin(arg), 2e-4)
          << s << "," << k;
    }
  }
  EXPECT_THROW(sdxl_vector_conditioning(pooled, torch::zeros({1, 5}), dim), std::invalid_argument);
}

TEST(UNetSDXL, ResBlockAndResamplingConvsAreLoRACompatible) {
  UNetModel unet(model_preset("tiny-sdxl").unet);
  auto modules = unet->named_modules();
  for (const char* name :
       {"input_blocks.1.0.in_layers.2", "input_blocks.1.0.out_layers.3",
        "input_blocks.3.0.skip_connection", "input_blocks.2.0.op", "output_blocks.1.2.conv"}) {
    ASSERT_TRUE(modules.contains(name)) << name;
    EXPECT_NE(modules[name]->as<LoRACompatibleConvImpl>(), nullptr) << name;
  }
  EXPECT_NE(modules["input_blocks.1.0.emb_layers.1"]->as<LoRACompatibleLinearImpl>(), nullptr);
  auto* op = modules["input_blocks.2.0.op"]->as<LoRACompatibleConvImpl>();
  EXPECT_EQ(op->kernel_size(), 3);
  EXPECT_EQ(op->stride(), 2);
  EXPECT_EQ(op->padding(), 1);
}

TEST(UNetSDXL, ConvAdapterUsesTheLayerKernelStrideAndPadding) {
  LoRACompatibleConv conv(4, 6, /*kernel_size=*/3, /*stride=*/2, /*padding=*/1);
  torch::NoGradGuard no_grad;
  torch::Tensor x = test::reference_values("conv.x", {1, 4, 8, 8});
  torch::Tensor base = conv->forward(x);
  auto a = std::make_shared<LoRAAdapter>();
  a->down = test::reference_values("conv.down", {2, 4, 3, 3});
  a->up = test::reference_values("conv.up", {6, 2, 1, 1});
  a->scale = 0.5;
  conv->set_adapter(a);
  torch::Tensor expected = base + 0.5 * at::conv2d(at::conv2d(x, a->down, {}, 2, 1), a->up);
  EXPECT_EQ(conv->forward(x).sizes(), torch::IntArrayRef({1, 6, 4, 4}));
  EXPECT_LT(test::max_abs_diff(conv->forward(x), expected), 1e-6);
  auto bad = std::make_shared<LoRAAdapter>(*a);
  bad->down = torch::zeros({2, 4, 1, 1});
  EXPECT_THROW(conv->set_adapter(bad), std::invalid_argument);
}

}  // namespace
}  // namespace lf
