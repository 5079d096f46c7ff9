// Full-size presets against the reference models (tests/oracle/check_full_size.py): lorafleet's
// checkpoint key listing (key<TAB>shape under the original ldm/sgm prefixes, exactly what
// `lorafleet-make-checkpoint --keys-only` writes) must be the one the references' own
// single-file conversion accepted with no missing / unexpected keys (SHA-256 of the canonical
// listing in tests/fixtures/oracle/<preset>_full_size.json), and each network's parameter count
// must equal the reference model's (diffusers UNet2DConditionModel / AutoencoderKL from the
// ldm/sgm yaml, transformers CLIPTextModel ViT-L/14, open_clip ViT-bigG-14's text tower with its
// logit_scale). random_checkpoint_key_shapes builds every network for real, one at a time, in
// bfloat16 (names, shapes and counts do not depend on the dtype): SDXL peaks at ~5.4 GB.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/io/sha256.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "model/vae_encoder.h"

namespace lf {
namespace {

const std::string kFixtureDir = LF_SOURCE_DIR "/tests/fixtures/oracle/";

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Parameters of the listing under `prefix`.
int64_t count_under(const KeyShapes& keys, const std::string& prefix) {
  int64_t n = 0;
  for (const auto& [key, shape] : keys) {
    if (key.rfind(prefix, 0) == 0) n += numel(shape);
  }
  return n;
}

std::vector<std::string> listing_lines(const KeyShapes& keys) {
  std::vector<std::string> lines;
  for (const auto& [key, shape] : keys) {
    std::ostringstream line;
    line << key << '\t';
    for (std::size_t d = 0; d < shape.size(); ++d) line << (d ? "," : "") << shape[d];
    lines.push_back(line.str());
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

// The listing of a preset, built once per test program (SDXL's takes ~25 s).
const KeyShapes& listing_of(const std::string& preset) {
  static std::map<std::string, KeyShapes> cache;
  auto it = cache.find(preset);
  if (it == cache.end()) {
    it = cache.emplace(preset, random_checkpoint_key_shapes(model_preset(preset))).first;
  }
  return it->second;
}

class OracleFullSize : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleFullSize, KeysAndParameterCountsMatchTheReference) {
  const std::string name = GetParam();
  std::ifstream f(kFixtureDir + name + "_full_size.json");
  ASSERT_TRUE(f) << "missing " << name << "_full_size.json: run tests/oracle/regen.sh";
  const nlohmann::json doc = nlohmann::json::parse(f);
  ASSERT_TRUE(doc.at("vae_decoder_checked").get<bool>());
  const auto& counts = doc.at("reference_parameter_counts");
  const ModelPreset preset = model_preset(name);
  const KeyShapes& keys = listing_of(name);

  EXPECT_EQ(count_under(keys, kUNetCheckpointPrefix), counts.at("unet").get<int64_t>()) << "UNet";
  EXPECT_EQ(count_under(keys, kVAECheckpointPrefix), counts.at("vae").get<int64_t>()) << "VAE";
  for (std::size_t i = 0; i < preset.text_encoders.size(); ++i) {
    const std::string te = "te" + std::to_string(i);
    EXPECT_EQ(count_under(keys, preset.text_encoders[i].checkpoint_prefix),
              counts.at(te).get<int64_t>())
        << te << " under " << preset.text_encoders[i].checkpoint_prefix;
  }
  if (name == "sd15") {
    EXPECT_EQ(count_under(keys, kUNetCheckpointPrefix), 859520964);  // the figure
  }

  const std::vector<std::string> lines = listing_lines(keys);
  std::string canonical;
  for (const auto& l : lines) canonical += l + "\n";
  EXPECT_EQ(static_cast<int64_t>(lines.size()), doc.at("key_count").get<int64_t>());
  if (sha256_hex(canonical) == doc.at("keys_sha256").get<std::string>()) return;
  // Name the differing lines when the accepted listing itself is committed (sd15).
  std::ostringstream msg;
  if (doc.contains("keys_file")) {
    std::ifstream kf(kFixtureDir + doc.at("keys_file").get<std::string>());
    std::vector<std::string> accepted;
    for (std::string line; std::getline(kf, line);) accepted.push_back(line);
    std::vector<std::string> only_ours, only_ref;
    std::set_difference(lines.begin(), lines.end(), accepted.begin(), accepted.end(),
                        std::back_inserter(only_ours));
    std::set_difference(accepted.begin(), accepted.end(), lines.begin(), lines.end(),
                        std::back_inserter(only_ref));
    for (std::size_t i = 0; i < std::min<std::size_t>(only_ours.size(), 10); ++i) {
      msg << "\n  lorafleet only: " << only_ours[i];
    }
    for (std::size_t i = 0; i < std::min<std::size_t>(only_ref.size(), 10); ++i) {
      msg << "\n  accepted only:  " << only_ref[i];
    }
  }
  ADD_FAILURE() << name << " key listing differs from the one the reference conversion accepted; "
                << "if intended, rerun tests/oracle/regen.sh (it re-checks the new listing)"
                << msg.str();
}

INSTANTIATE_TEST_SUITE_P(Presets, OracleFullSize, ::testing::Values("sd15", "sdxl"));

// SDXL's defining shapes (sgm openaimodel.UNetModel with sd_xl_base.yaml), read from the same
// listing.
TEST(OracleFullSize, SdxlLayout) {
  const KeyShapes& keys = listing_of("sdxl");
  const std::string u = kUNetCheckpointPrefix;
  EXPECT_EQ(keys.at(u + "label_emb.0.0.weight"), (std::vector<int64_t>{1280, 2816}));
  EXPECT_EQ(keys.at(u + "input_blocks.4.1.transformer_blocks.0.attn2.to_k.weight"),
            (std::vector<int64_t>{640, 2048}));
  EXPECT_TRUE(keys.count(u + "input_blocks.7.1.transformer_blocks.9.norm3.weight"));
  EXPECT_TRUE(keys.count(u + "middle_block.1.transformer_blocks.9.norm3.weight"));
  EXPECT_TRUE(keys.count(u + "output_blocks.2.2.conv.weight"));  // upsample after attention
  EXPECT_FALSE(keys.count(u + "input_blocks.1.1.norm.weight"));  // level 0 has no attention
  int64_t blocks = 0;
  for (const auto& kv : keys) {
    const std::string& k = kv.first;
    if (k.size() > 12 && k.compare(k.size() - 12, 12, "norm1.weight") == 0 &&
        k.find(".transformer_blocks.") != std::string::npos && k.rfind(u, 0) == 0) {
      ++blocks;
    }
  }
  EXPECT_EQ(blocks, 70);  // 11 SpatialTransformers holding 70 BasicTransformerBlocks
  EXPECT_EQ(keys.at("conditioner.embedders.1.model.text_projection"),
            (std::vector<int64_t>{1280, 1280}));
}

}  // namespace
}  // namespace lf
