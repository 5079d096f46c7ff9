// CLIPTextModel (HF CLIPTextTransformer) against transformers.CLIPTextModel(WithProjection):
// exact key set, last hidden state, clip-skip-2 output, pooled / projected output on name-hashed
// weights, causality, argument checks, and the open_clip key layout (load and export).
#include <gtest/gtest.h>

#include <algorithm>

#include <torch/torch.h>

#include "core_references.h"
#include "core_test_util.h"
#include "model/clip_text_model.h"
#include "model/model_config.h"
#include "model/state_dict.h"
#include "model_references.h"

namespace lf {
namespace {

CLIPTextConfig tiny_text() { return model_preset("tiny").text_encoders.at(0).config; }

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
  CLIPTextModel clip(tiny_text());
  const std::vector<std::string> expected(std::begin(ref::kCLIPTinyKeys),
                                          std::end(ref::kCLIPTinyKeys));
  EXPECT_EQ(test::parameter_names(*clip), expected);
}

TEST(CLIPTextModel, TinyOutputsMatchTransformersWithin1e5) {
  CLIPTextModel clip(tiny_text());
  test::fill_reference_weights(*clip);
  torch::NoGradGuard no_grad;
  torch::Tensor last = clip->forward(reference_ids()).hidden;
  ASSERT_EQ(last.sizes(), torch::IntArrayRef({2, 77, 64}));
  torch::Tensor expected =
      test::from_array(ref::kCLIPTinyLastHidden, ref::kCLIPTinyLastHidden_shape);
  EXPECT_LT(test::max_abs_diff(at_reference_positions(last), expected), 1e-5);

  torch::Tensor skip2 = clip->forward(reference_ids(), /*hidden_layer_from_end=*/2).hidden;
  torch::Tensor expected2 =
      test::from_array(ref::kCLIPTinyClipSkip2, ref::kCLIPTinyClipSkip2_shape);
  EXPECT_LT(test::max_abs_diff(at_reference_positions(skip2), expected2), 1e-5);
  EXPECT_GT(test::max_abs_diff(skip2, last), 0.1);
}

TEST(CLIPTextModel, AttentionIsCausal) {
  CLIPTextModel clip(tiny_text());
  test::fill_reference_weights(*clip);
  torch::NoGradGuard no_grad;
  torch::Tensor ids = reference_ids();
  torch::Tensor changed = ids.clone();
  const int64_t k = 10;
  changed.index_put_({0, k}, 1234);
  torch::Tensor a = clip->forward(ids).hidden, b = clip->forward(changed).hidden;
  EXPECT_TRUE(torch::equal(a.slice(1, 0, k), b.slice(1, 0, k)));
  EXPECT_GT(test::max_abs_diff(a[0][k], b[0][k]), 1e-3);
  EXPECT_GT(test::max_abs_diff(a[0][76], b[0][76]), 1e-6);
  EXPECT_TRUE(torch::equal(a[1], b[1]));
}

TEST(CLIPTextModel, RejectsBadClipSkipAndLength) {
  CLIPTextModel clip(tiny_text());
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::zeros({1, 77}, torch::kInt64);
  EXPECT_THROW(clip->forward(ids, 0), std::invalid_argument);
  EXPECT_THROW(clip->forward(ids, 3), std::invalid_argument);  // 2 layers
  EXPECT_THROW(clip->forward(torch::zeros({1, 78}, torch::kInt64)), std::invalid_argument);
}

TEST(CLIPTextConfig, RejectsUnknownActivation) {
  CLIPTextConfig c = tiny_text();
  c.activation = "relu";
  EXPECT_THROW(CLIPTextModel{c}, std::invalid_argument);
}

CLIPTextConfig sd2_text() { return model_preset("tiny-sd2").text_encoders.at(0).config; }

torch::Tensor projection_ids() {
  return torch::tensor(std::vector<int64_t>(std::begin(ref::kCLIPProjInputIds),
                                            std::end(ref::kCLIPProjInputIds)))
      .reshape({2, 77});
}

TEST(CLIPTextModel, PenultimateAndProjectedPooledMatchTransformersWithin1e5) {
  CLIPTextModel clip(sd2_text());
  EXPECT_EQ(clip->named_parameters()["text_projection.weight"].sizes(),
            torch::IntArrayRef({64, 64}));
  EXPECT_FALSE(clip->named_parameters().contains("text_projection.bias"));
  test::fill_reference_weights(*clip);
  torch::NoGradGuard no_grad;
  CLIPTextOutput out = clip->forward(projection_ids(), /*hidden_layer_from_end=*/2,
                                     /*apply_final_layer_norm=*/true);
  ASSERT_EQ(out.hidden.sizes(), torch::IntArrayRef({2, 77, 64}));
  EXPECT_LT(test::max_abs_diff(
                at_reference_positions(out.hidden),
                test::from_array(ref::kCLIPProjPenultimateLN, ref::kCLIPProjPenultimateLN_shape)),
            1e-5);
  // Pooled: final LN of the last layer at the first eos (row 0: 20, open_clip 0-padding;
  // row 1: 60, CLIP-L eos-padding), times text_projection.
  torch::Tensor expected =
      test::from_array(ref::kCLIPProjTextEmbeds, ref::kCLIPProjTextEmbeds_shape);
  ASSERT_EQ(out.pooled.sizes(), expected.sizes());
  EXPECT_LT(test::max_abs_diff(out.pooled, expected), 1e-5);
  // The pooled output does not depend on the selected hidden layer.
  EXPECT_TRUE(torch::equal(clip->forward(projection_ids(), 1, false).pooled, out.pooled));
}

TEST(CLIPTextModel, PooledWithoutProjectionIsTheFinalNormedEosToken) {
  CLIPTextModel clip(tiny_text());
  test::fill_reference_weights(*clip);
  torch::NoGradGuard no_grad;
  CLIPTextOutput out = clip->forward(reference_ids());
  ASSERT_EQ(out.pooled.sizes(), torch::IntArrayRef({2, 64}));
  // reference_ids: eos from position 20 (row 0) and 60 (row 1).
  EXPECT_TRUE(torch::equal(out.pooled[0], out.hidden[0][20]));
  EXPECT_TRUE(torch::equal(out.pooled[1], out.hidden[1][60]));
}

TEST(CLIPTextModel, OpenClipLayoutRoundTripsWithFusedQkvAndTransposedProjection) {
  CLIPTextModel src(sd2_text());
  test::fill_reference_weights(*src);
  const std::string prefix = "cond_stage_model.model.";
  WeightMap oc = text_encoder_weights(src, prefix, TextEncoderLayout::kOpenCLIP);
  auto ours = src->named_parameters();
  const torch::Tensor& in_proj = oc.at(prefix + "transformer.resblocks.1.attn.in_proj_weight");
  ASSERT_EQ(in_proj.sizes(), torch::IntArrayRef({192, 64}));
  EXPECT_TRUE(
      torch::equal(in_proj.slice(0, 0, 64), ours["encoder.layers.1.self_attn.q_proj.weight"]));
  EXPECT_TRUE(
      torch::equal(in_proj.slice(0, 64, 128), ours["encoder.layers.1.self_attn.k_proj.weight"]));
  EXPECT_TRUE(
      torch::equal(in_proj.slice(0, 128, 192), ours["encoder.layers.1.self_attn.v_proj.weight"]));
  EXPECT_TRUE(
      torch::equal(oc.at(prefix + "transformer.resblocks.1.attn.in_proj_bias").slice(0, 64, 128),
                   ours["encoder.layers.1.self_attn.k_proj.bias"]));
  EXPECT_TRUE(torch::equal(oc.at(prefix + "text_projection"), ours["text_projection.weight"].t()));
  EXPECT_EQ(oc.at(prefix + "positional_embedding").sizes(), torch::IntArrayRef({77, 64}));
  EXPECT_TRUE(oc.count(prefix + "transformer.resblocks.2.mlp.c_proj.bias"));
  EXPECT_TRUE(oc.count(prefix + "ln_final.weight"));
  EXPECT_EQ(oc.size(), 5u + 3u * 12u);  // token/pos emb, ln_final x2, proj; 12 per block

  // Make the projection non-square so a missing transpose cannot go unnoticed.
  CLIPTextConfig rect = sd2_text();
  rect.projection_dim = 32;
  CLIPTextModel rect_src(rect);
  test::fill_reference_weights(*rect_src);
  WeightMap rect_oc = text_encoder_weights(rect_src, prefix, TextEncoderLayout::kOpenCLIP);
  EXPECT_EQ(rect_oc.at(prefix + "text_projection").sizes(), torch::IntArrayRef({64, 32}));
  rect_oc[prefix + "logit_scale"] = torch::ones({});
  rect_oc[prefix + "attn_mask"] = torch::zeros({77, 77});
  CLIPTextModel rect_dst(rect);
  ASSERT_NO_THROW(load_state_dict(rect_dst, rect_oc, prefix, TextEncoderLayout::kOpenCLIP));
  auto a = rect_src->named_parameters(), b = rect_dst->named_parameters();
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(rect_src->forward(projection_ids(), 2).pooled,
                           rect_dst->forward(projection_ids(), 2).pooled));
}

TEST(CLIPTextModel, OpenClipErrorsNameTheOpenClipKeys) {
  CLIPTextModel src(sd2_text());
  const std::string prefix = "conditioner.embedders.1.model.";
  const WeightMap good = text_encoder_weights(src, prefix, TextEncoderLayout::kOpenCLIP);
  auto error = [&](const WeightMap& w) {
    CLIPTextModel dst(sd2_text());
    try {
      load_state_dict(dst, w, prefix, TextEncoderLayout::kOpenCLIP);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  WeightMap w = good;
  w.erase(prefix + "transformer.resblocks.0.attn.in_proj_weight");
  std::string what = error(w);
  EXPECT_NE(what.find("1 missing keys: " + prefix + "transformer.resblocks.0.attn.in_proj_weight"),
            std::string::npos)
      << what;
  w = good;
  w[prefix + "text_projection"] = torch::zeros({64, 32});
  what = error(w);
  EXPECT_NE(what.find(prefix + "text_projection: expected [64, 64], found [64, 32]"),
            std::string::npos)
      << what;
  w = good;
  w[prefix + "transformer.resblocks.3.ln_1.weight"] = torch::ones({64});  // a 4th block
  what = error(w);
  EXPECT_NE(what.find("unexpected keys: " + prefix + "transformer.resblocks.3.ln_1.weight"),
            std::string::npos)
      << what;
  // The HF layout under an open_clip prefix is all missing / unexpected.
  CLIPTextModel dst(sd2_text());
  EXPECT_THROW(load_state_dict(dst, text_encoder_weights(src, prefix, TextEncoderLayout::kHF),
                               prefix, TextEncoderLayout::kOpenCLIP),
               std::runtime_error);
}

TEST(CLIPTextModel, OpenClipNamedWeightsReproduceOpenClipWithin1e5) {
  // Weights are hashes of the open_clip key names, so the key mapping (fused q|k|v rows,
  // transposed text_projection, positional_embedding) decides whether this matches.
  const TextEncoderSpec te2 = model_preset("tiny-sdxl").text_encoders.at(1);
  CLIPTextModel clip(te2.config);
  const std::string prefix = te2.checkpoint_prefix;
  std::vector<std::string> keys;
  WeightMap w;
  for (const auto& kv : text_encoder_weights(clip, prefix, TextEncoderLayout::kOpenCLIP)) {
    const std::string rel = kv.first.substr(prefix.size());
    keys.push_back(rel);
    w[kv.first] = test::reference_param(
        "oc." + rel, std::vector<int64_t>(kv.second.sizes().begin(), kv.second.sizes().end()));
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, std::vector<std::string>(std::begin(ref::kOpenClipTextKeys),
                                           std::end(ref::kOpenClipTextKeys)));
  w[prefix + "logit_scale"] = torch::ones({});
  ASSERT_NO_THROW(load_state_dict(clip, w, prefix, TextEncoderLayout::kOpenCLIP));
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::tensor(std::vector<int64_t>(std::begin(ref::kOpenClipInputIds),
                                                         std::end(ref::kOpenClipInputIds)))
                          .reshape({2, 77});
  CLIPTextOutput out = clip->forward(ids, te2.hidden_layer_from_end, te2.apply_final_layer_norm);
  EXPECT_LT(test::max_abs_diff(
                at_reference_positions(out.hidden),
                test::from_array(ref::kOpenClipPenultimate, ref::kOpenClipPenultimate_shape)),
            1e-5);
  torch::Tensor pooled = test::from_array(ref::kOpenClipPooled, ref::kOpenClipPooled_shape);
  ASSERT_EQ(out.pooled.sizes(), pooled.sizes());
  EXPECT_GT(pooled.abs().max().item<double>(), 0.5);
  EXPECT_LT(test::max_abs_diff(out.pooled, pooled), 1e-5);
}

}  // namespace
}  // namespace lf
