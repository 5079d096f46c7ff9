// Full-size presets against the reference models (tests/oracle/check_full_size.py): lorafleet's
// checkpoint key listing (key<TAB>shape under the original ldm prefixes) must be exactly the one
// the references' own single-file conversion accepted with no missing / unexpected keys
// (SHA-256 of the canonical listing in tests/fixtures/oracle/<preset>_full_size.json), and each
// network's parameter count must equal the reference model's (diffusers UNet2DConditionModel /
// AutoencoderKL from the ldm yaml, transformers CLIPTextModel ViT-L/14; SD 1.5 UNet
// 859,520,964). Models are built one at a time in bfloat16 (names, shapes and counts do not
// depend on the dtype) to halve the memory: SD 1.5 UNet ~1.7 GB.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/io/sha256.h"
#include "model/clip_text_model.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "model/vae_encoder.h"

namespace lf {
namespace {

const std::string kFixtureDir = LF_SOURCE_DIR "/tests/fixtures/oracle/";

struct Listing {
  std::vector<std::string> lines;  // "key\td0,d1", unsorted
  int64_t numel = 0;
};

void add_module(Listing& out, const torch::nn::Module& module, const std::string& prefix) {
  for (const auto& p : module.named_parameters()) {
    std::ostringstream line;
    line << prefix << p.key() << '\t';
    for (int64_t d = 0; d < p.value().dim(); ++d) line << (d ? "," : "") << p.value().size(d);
    out.lines.push_back(line.str());
    out.numel += p.value().numel();
  }
}

// Default dtype bfloat16 for the scope (parameters are created with the default dtype).
class DefaultDtype {
 public:
  explicit DefaultDtype(caffe2::TypeMeta t) : saved_(torch::get_default_dtype()) {
    torch::set_default_dtype(t);
  }
  ~DefaultDtype() { torch::set_default_dtype(saved_); }

 private:
  caffe2::TypeMeta saved_;
};

TEST(OracleFullSize, Sd15KeysAndParameterCountsMatchTheReference) {
  std::ifstream f(kFixtureDir + "sd15_full_size.json");
  ASSERT_TRUE(f) << "missing sd15_full_size.json: run tests/oracle/regen.sh";
  const nlohmann::json doc = nlohmann::json::parse(f);
  const auto& counts = doc.at("reference_parameter_counts");
  const ModelPreset preset = model_preset("sd15");
  DefaultDtype bf16(caffe2::TypeMeta::Make<c10::BFloat16>());

  Listing all;
  {
    Listing unet_list;
    UNetModel unet(preset.unet);
    add_module(unet_list, *unet, kUNetCheckpointPrefix);
    EXPECT_EQ(unet_list.numel, counts.at("unet").get<int64_t>()) << "UNet parameter count";
    EXPECT_EQ(unet_list.numel, 859520964);
    all.lines.insert(all.lines.end(), unet_list.lines.begin(), unet_list.lines.end());
  }
  {
    Listing vae_list;
    VAEEncoder vae(preset.vae);
    add_module(vae_list, *vae, kVAECheckpointPrefix);
    // lorafleet has the encoder half only; the full VAE count is compared once it has the
    // decoder (doc["vae_decoder_checked"] becomes true when the listing carries it).
    ASSERT_FALSE(doc.at("vae_decoder_checked").get<bool>())
        << "the fixture checked a VAE decoder: compare the full VAE count here";
    EXPECT_EQ(vae_list.numel, counts.at("vae_encoder").get<int64_t>()) << "VAE encoder count";
    all.lines.insert(all.lines.end(), vae_list.lines.begin(), vae_list.lines.end());
  }
  {
    Listing text_list;
    CLIPTextModel text(preset.text);
    add_module(text_list, *text, kCLIPTextCheckpointPrefix);
    EXPECT_EQ(text_list.numel, counts.at("te0").get<int64_t>()) << "text encoder count";
    all.lines.insert(all.lines.end(), text_list.lines.begin(), text_list.lines.end());
  }

  std::sort(all.lines.begin(), all.lines.end());
  std::string canonical;
  for (const auto& l : all.lines) canonical += l + "\n";
  EXPECT_EQ(static_cast<int64_t>(all.lines.size()), doc.at("key_count").get<int64_t>());
  if (sha256_hex(canonical) != doc.at("keys_sha256").get<std::string>()) {
    // Name the differing lines against the recorded listing.
    std::ifstream kf(kFixtureDir + doc.at("keys_file").get<std::string>());
    std::vector<std::string> accepted;
    for (std::string line; std::getline(kf, line);) accepted.push_back(line);
    std::vector<std::string> only_ours, only_ref;
    std::set_difference(all.lines.begin(), all.lines.end(), accepted.begin(), accepted.end(),
                        std::back_inserter(only_ours));
    std::set_difference(accepted.begin(), accepted.end(), all.lines.begin(), all.lines.end(),
                        std::back_inserter(only_ref));
    std::ostringstream msg;
    for (size_t i = 0; i < std::min<size_t>(only_ours.size(), 10); ++i)
      msg << "\n  lorafleet only: " << only_ours[i];
    for (size_t i = 0; i < std::min<size_t>(only_ref.size(), 10); ++i)
      msg << "\n  accepted only:  " << only_ref[i];
    ADD_FAILURE() << "sd15 key listing differs from the one the reference conversion accepted ("
                  << only_ours.size() << " / " << only_ref.size() << " lines); if intended, "
                  << "rerun tests/oracle/regen.sh (it re-checks the new listing)" << msg.str();
  }
}

}  // namespace
}  // namespace lf
