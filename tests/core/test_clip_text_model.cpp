// CLIPTextModel (HF CLIPTextTransformer) against transformers.CLIPTextModel: exact key set,
// last hidden state and clip-skip-2 output on name-hashed weights, causality and argument checks.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core_references.h"
#include "core_test_util.h"
#include "model/clip_text_model.h"
#include "model/model_config.h"

namespace lf {
namespace {

torch::Tensor reference_ids() {
  return torch::tensor(std::vector<int64_t>(std::begin(ref::kCLIPTinyInputIds),
                                            std::end(ref::kCLIPTinyInputIds)))
      .reshape({2, 77});
}

torch::Tensor at_reference_positions(const torch::Tensor& hidden) {
  torch::Tensor pos = torch::tensor(
      std::vector<int64_t>(std::begin(ref::kCLIPPositions), std::end(ref::kCLIPPositions)));
  return hidden.index_select(1, pos);
}

TEST(CLIPTextModel, TinyKeySetEqualsTransformers) {
  CLIPTextModel clip(model_preset("tiny").text);
  const std::vector<std::string> expected(std::begin(ref::kCLIPTinyKeys),
                                          std::end(ref::kCLIPTinyKeys));
  EXPECT_EQ(test::parameter_names(*clip), expected);
}

TEST(CLIPTextModel, TinyOutputsMatchTransformersWithin1e5) {
  CLIPTextModel clip(model_preset("tiny").text);
  test::fill_reference_weights(*clip);
  torch::NoGradGuard no_grad;
  torch::Tensor last = clip->forward(reference_ids());
  ASSERT_EQ(last.sizes(), torch::IntArrayRef({2, 77, 64}));
  torch::Tensor expected =
      test::from_array(ref::kCLIPTinyLastHidden, ref::kCLIPTinyLastHidden_shape);
  EXPECT_LT(test::max_abs_diff(at_reference_positions(last), expected), 1e-5);

  torch::Tensor skip2 = clip->forward(reference_ids(), /*clip_skip=*/2);
  torch::Tensor expected2 =
      test::from_array(ref::kCLIPTinyClipSkip2, ref::kCLIPTinyClipSkip2_shape);
  EXPECT_LT(test::max_abs_diff(at_reference_positions(skip2), expected2), 1e-5);
  EXPECT_GT(test::max_abs_diff(skip2, last), 0.1);
}

TEST(CLIPTextModel, AttentionIsCausal) {
  CLIPTextModel clip(model_preset("tiny").text);
  test::fill_reference_weights(*clip);
  torch::NoGradGuard no_grad;
  torch::Tensor ids = reference_ids();
  torch::Tensor changed = ids.clone();
  const int64_t k = 10;
  changed.index_put_({0, k}, 1234);
  torch::Tensor a = clip->forward(ids), b = clip->forward(changed);
  EXPECT_TRUE(torch::equal(a.slice(1, 0, k), b.slice(1, 0, k)));
  EXPECT_GT(test::max_abs_diff(a[0][k], b[0][k]), 1e-3);
  EXPECT_GT(test::max_abs_diff(a[0][76], b[0][76]), 1e-6);
  EXPECT_TRUE(torch::equal(a[1], b[1]));
}

TEST(CLIPTextModel, RejectsBadClipSkipAndLength) {
  CLIPTextModel clip(model_preset("tiny").text);
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::zeros({1, 77}, torch::kInt64);
  EXPECT_THROW(clip->forward(ids, 0), std::invalid_argument);
  EXPECT_THROW(clip->forward(ids, 3), std::invalid_argument);  // 2 layers
  EXPECT_THROW(clip->forward(torch::zeros({1, 78}, torch::kInt64)), std::invalid_argument);
}

TEST(CLIPTextConfig, RejectsUnknownActivation) {
  CLIPTextConfig c = model_preset("tiny").text;
  c.activation = "relu";
  EXPECT_THROW(CLIPTextModel{c}, std::invalid_argument);
}

}  // namespace
}  // namespace lf
