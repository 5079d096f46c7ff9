// kohya's block-wise network_args (common/config/kohya_blocks.h). The expected preset weights are
// kohya networks/lora.py get_block_lr_weight's get_list, evaluated with Python's math module:
//   sine    [math.sin(math.pi * (i / (n - 1)) / 2) + base for i in range(n)]
//   cosine  the same over reversed(range(n));  linear  [i / (n - 1) + base ...]; reverse_linear.
// Also kohya's list forms, cut / fill and threshold rules, the SDXL layout, block_dims /
// alphas resolution (get_block_dims_and_alphas, remove_block_dims_and_alphas) and the start-up
// checks of the job config.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/config/job_config.h"
#include "common/config/kohya_blocks.h"

namespace lf {
namespace {

JobConfig config(const std::string& network) {
  return parse_job_config(
      "model:\n  pretrained_model_name_or_path: /m.safetensors\ndataset:\n  train_data_dir: /d\n"
      "network:\n" +
          network,
      "t.yaml");
}

void expect_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << "i = " << i;
}

TEST(KohyaBlockPresets, EqualKohyasGetList) {
  expect_values(kohya_lr_weight_preset("sine", 0.0, 12),
                {0.0, 0.14231483827328514, 0.28173255684142967, 0.4154150130018864,
                 0.5406408174555976, 0.654860733945285, 0.7557495743542583, 0.8412535328311811,
                 0.9096319953545183, 0.9594929736144974, 0.9898214418809327, 1.0});
  expect_values(kohya_lr_weight_preset("cosine", 0.0, 12),
                {1.0, 0.9898214418809327, 0.9594929736144974, 0.9096319953545183,
                 0.8412535328311811, 0.7557495743542583, 0.654860733945285, 0.5406408174555976,
                 0.4154150130018864, 0.28173255684142967, 0.14231483827328514, 0.0});
  expect_values(kohya_lr_weight_preset("linear", 0.0, 12),
                {0.0, 0.09090909090909091, 0.18181818181818182, 0.2727272727272727,
                 0.36363636363636365, 0.45454545454545453, 0.5454545454545454, 0.6363636363636364,
                 0.7272727272727273, 0.8181818181818182, 0.9090909090909091, 1.0});
  expect_values(kohya_lr_weight_preset("reverse_linear", 0.0, 12),
                {1.0, 0.9090909090909091, 0.8181818181818182, 0.7272727272727273,
                 0.6363636363636364, 0.5454545454545454, 0.45454545454545453, 0.36363636363636365,
                 0.2727272727272727, 0.18181818181818182, 0.09090909090909091, 0.0});
  // SDXL: 9 blocks.
  expect_values(
      kohya_lr_weight_preset("sine", 0.0, 9),
      {0.0, 0.19509032201612825, 0.3826834323650898, 0.5555702330196022, 0.7071067811865475,
       0.8314696123025452, 0.9238795325112867, 0.9807852804032304, 1.0});
  expect_values(
      kohya_lr_weight_preset("cosine", 0.0, 9),
      {1.0, 0.9807852804032304, 0.9238795325112867, 0.8314696123025452, 0.7071067811865475,
       0.5555702330196022, 0.3826834323650898, 0.19509032201612825, 0.0});
  expect_values(kohya_lr_weight_preset("linear", 0.5, 9),
                {0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375, 1.5});
  expect_values(kohya_lr_weight_preset("zeros", 0.25, 12), std::vector<double>(12, 0.25));
  EXPECT_THROW(kohya_lr_weight_preset("square", 0.0, 12), std::invalid_argument);
}

TEST(KohyaBlockLrWeights, SdLayoutPresetsListsCutFillAndThreshold) {
  EXPECT_TRUE(kohya_block_lr_weights(config("  network_dim: 4\n").network, false).weights.empty());
  // "sine+0.5" for down, mid 2, up not given (all 1): 12 + 1 + 12.
  KohyaBlockLrWeights w = kohya_block_lr_weights(
      config("  down_lr_weight: sine+0.5\n  mid_lr_weight: 2\n").network, false);
  ASSERT_EQ(w.weights.size(), 25u);
  EXPECT_DOUBLE_EQ(w.weights[0], 0.5);
  EXPECT_DOUBLE_EQ(w.weights[1], 0.14231483827328514 + 0.5);
  EXPECT_DOUBLE_EQ(w.weights[11], 1.5);
  EXPECT_DOUBLE_EQ(w.weights[12], 2.0);
  for (std::size_t i = 13; i < 25; ++i) EXPECT_DOUBLE_EQ(w.weights[i], 1.0);
  EXPECT_TRUE(w.notes.empty());
  // A list: empty entries are 0, a short one is filled with 1 (with a note), a long one cut;
  // weights not above block_lr_zero_threshold become 0.
  w = kohya_block_lr_weights(config("  down_lr_weight: 0.05,,0.5\n  up_lr_weight: "
                                    "1,1,1,1,1,1,1,1,1,1,1,1,7,7\n  block_lr_zero_threshold: 0.1\n")
                                 .network,
                             false);
  ASSERT_EQ(w.weights.size(), 25u);
  EXPECT_EQ(std::vector<double>(w.weights.begin(), w.weights.begin() + 4),
            (std::vector<double>{0.0, 0.0, 0.5, 1.0}));
  EXPECT_DOUBLE_EQ(w.weights[24], 1.0);
  ASSERT_EQ(w.notes.size(), 2u);
  EXPECT_NE(w.notes[0].find("network.down_lr_weight: 3 values for 12 blocks"), std::string::npos)
      << w.notes[0];
}

TEST(KohyaBlockLrWeights, SdxlLayoutAddsEmbeddingAndOutBlocks) {
  const KohyaBlockLrWeights w = kohya_block_lr_weights(
      config("  down_lr_weight: zeros\n  mid_lr_weight: 0.5,0.25,0\n  up_lr_weight: linear\n")
          .network,
      true);
  ASSERT_EQ(w.weights.size(), 23u);
  EXPECT_DOUBLE_EQ(w.weights[0], 1.0);  // time / label embedding
  for (std::size_t i = 1; i <= 9; ++i) EXPECT_DOUBLE_EQ(w.weights[i], 0.0);
  EXPECT_DOUBLE_EQ(w.weights[10], 0.5);
  EXPECT_DOUBLE_EQ(w.weights[11], 0.25);
  EXPECT_DOUBLE_EQ(w.weights[12], 0.0);
  EXPECT_DOUBLE_EQ(w.weights[13], 0.0);  // linear starts at 0
  EXPECT_DOUBLE_EQ(w.weights[14], 0.125);
  EXPECT_DOUBLE_EQ(w.weights[21], 1.0);
  EXPECT_DOUBLE_EQ(w.weights[22], 1.0);  // out
}

TEST(KohyaBlockDims, ListsDefaultsAndBlocksLeftOutByAZeroWeight) {
  // Only lr weights: every block network_dim / network_alpha, conv_dim for the 3x3 convs, and
  // the blocks at weight 0 get rank 0 (remove_block_dims_and_alphas).
  JobConfig c = config(
      "  network_dim: 8\n  network_alpha: 4\n  conv_dim: 2\n  conv_alpha: 1\n"
      "  down_lr_weight: 0,1,1,1,1,1,1,1,1,1,1,0\n");
  KohyaBlockDims d =
      kohya_block_dims(c.network, false, kohya_block_lr_weights(c.network, false).weights);
  ASSERT_TRUE(d.active);
  ASSERT_EQ(d.dims.size(), 25u);
  EXPECT_EQ(d.dims[0], 0);
  EXPECT_EQ(d.dims[1], 8);
  EXPECT_EQ(d.dims[11], 0);
  EXPECT_EQ(d.conv_dims[11], 0);
  EXPECT_EQ(d.conv_dims[12], 2);
  EXPECT_DOUBLE_EQ(d.alphas[5], 4.0);
  EXPECT_DOUBLE_EQ(d.conv_alphas[5], 1.0);
  // block_dims / alphas as given; conv_block_dims with conv_alpha for their alphas.
  std::string dims, alphas, conv;
  for (int i = 0; i < 23; ++i) {
    dims += (i ? "," : "") + std::to_string(i % 4);
    alphas += (i ? "," : "") + std::to_string(i) + ".5";
    conv += (i ? "," : "") + std::string(i == 3 ? "0" : "1");
  }
  c = config("  conv_alpha: 0.25\n  block_dims: " + dims + "\n  block_alphas: " + alphas +
             "\n  conv_block_dims: " + conv + "\n");
  d = kohya_block_dims(c.network, true, {});
  ASSERT_EQ(d.dims.size(), 23u);
  EXPECT_EQ(d.dims[6], 2);
  EXPECT_DOUBLE_EQ(d.alphas[6], 6.5);
  EXPECT_EQ(d.conv_dims[3], 0);
  EXPECT_DOUBLE_EQ(d.conv_alphas[3], 0.25);
  // 23 values do not fit SD 1.x/2.x's 25 blocks.
  try {
    kohya_block_dims(c.network, false, {});
    FAIL() << "expected a length error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("network.block_dims: expected 25 comma-separated"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(kohya_block_dims(config("  conv_dim: 2\n").network, false, {}).active);
}

TEST(KohyaBlockArgs, StartUpChecksNameTheKey) {
  auto error_of = [](const std::string& network) {
    try {
      config(network);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("  down_lr_weight: sin\n")
                .find("key 'network.down_lr_weight': expected a preset (sine, cosine, linear, "
                      "reverse_linear or zeros, optionally with +offset) or comma-separated "
                      "numbers, got 'sin'"),
            std::string::npos)
      << error_of("  down_lr_weight: sin\n");
  EXPECT_NE(error_of("  mid_lr_weight: 1,x\n").find("key 'network.mid_lr_weight'"),
            std::string::npos);
  EXPECT_NE(error_of("  block_dims: 1,2,3\n").find("key 'network.block_dims': expected 23 "),
            std::string::npos)
      << error_of("  block_dims: 1,2,3\n");
  EXPECT_NE(error_of("  block_dims: 1,2,3\n").find("(25 blocks for SD 1.x/2.x, 23 for SDXL)"),
            std::string::npos);
  EXPECT_NE(error_of("  block_alphas: 1\n").find("key 'network.block_alphas': needs block_dims"),
            std::string::npos);
  EXPECT_NE(error_of("  up_lr_weight: sine\n  conv_block_alphas: 1\n")
                .find("key 'network.conv_block_alphas': needs conv_block_dims"),
            std::string::npos);
  EXPECT_NE(error_of("  dim_from_weights: true\n")
                .find("key 'network.dim_from_weights': needs network.network_weights"),
            std::string::npos);
  EXPECT_NE(error_of("  dim_from_weights: true\n  network_weights: /a.safetensors\n"
                     "  rank_dropout: 0.1\n")
                .find("key 'network.rank_dropout': is not taken with network.dim_from_weights"),
            std::string::npos);
  EXPECT_NE(error_of("  module_dropout: 1\n").find("key 'network.module_dropout'"),
            std::string::npos);
  // kohya's forms are accepted as they are.
  EXPECT_EQ(error_of("  down_lr_weight: cosine+0.25\n  mid_lr_weight: 1\n  up_lr_weight: "
                     "0,0,0,0,0,0,1,1,1,1,1,1\n  block_lr_zero_threshold: 0.1\n"
                     "  network_dropout: 0.1\n  rank_dropout: 0.2\n  module_dropout: 0.1\n"),
            "no error");
  EXPECT_EQ(error_of("  dim_from_weights: true\n  network_weights: /a.safetensors\n"
                     "  up_lr_weight: sine\n"),
            "no error");
}

}  // namespace
}  // namespace lf
