// Validation of the model hyper-parameters and the named presets ("tiny", "sd15").
// Values for sd15 follow ldm configs/stable-diffusion/v1-inference.yaml and CLIP ViT-L/14.
#include "model/model_config.h"

#include <stdexcept>

namespace lf {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace

int64_t UNetConfig::heads_for(int64_t channels) const {
  if (num_head_channels > 0) return channels / num_head_channels;
  return num_heads;
}

void UNetConfig::validate() const {
  require(in_channels > 0 && out_channels > 0, "UNetConfig: in/out_channels must be > 0");
  require(model_channels > 0, "UNetConfig: model_channels must be > 0");
  require(!channel_mult.empty(), "UNetConfig: channel_mult must not be empty");
  require(attention_levels.size() == channel_mult.size(),
          "UNetConfig: attention_levels must have one entry per channel_mult level");
  require(num_res_blocks >= 1, "UNetConfig: num_res_blocks must be >= 1");
  require(transformer_depth >= 1, "UNetConfig: transformer_depth must be >= 1");
  require(context_dim > 0, "UNetConfig: context_dim must be > 0");
  require(norm_num_groups > 0, "UNetConfig: norm_num_groups must be > 0");
  require((num_heads > 0) != (num_head_channels > 0),
          "UNetConfig: exactly one of num_heads / num_head_channels must be > 0");
  require(model_channels % norm_num_groups == 0,
          "UNetConfig: model_channels must be divisible by norm_num_groups");
  for (int64_t mult : channel_mult) {
    require(mult > 0, "UNetConfig: channel_mult entries must be > 0");
    const int64_t ch = mult * model_channels;
    require(ch % norm_num_groups == 0,
            "UNetConfig: every level's channels must be divisible by norm_num_groups");
    if (num_head_channels > 0) {
      require(ch % num_head_channels == 0,
              "UNetConfig: level channels must be divisible by num_head_channels");
    } else {
      require(ch % num_heads == 0, "UNetConfig: level channels must be divisible by num_heads");
    }
  }
}

int64_t VAEConfig::downsample_factor() const { return int64_t{1} << (ch_mult.size() - 1); }

void VAEConfig::validate() const {
  require(ch > 0 && in_channels > 0 && z_channels > 0, "VAEConfig: channels must be > 0");
  require(!ch_mult.empty(), "VAEConfig: ch_mult must not be empty");
  require(num_res_blocks >= 1, "VAEConfig: num_res_blocks must be >= 1");
  require(norm_num_groups > 0, "VAEConfig: norm_num_groups must be > 0");
  require(scale_factor > 0, "VAEConfig: scale_factor must be > 0");
  require(ch % norm_num_groups == 0, "VAEConfig: ch must be divisible by norm_num_groups");
  for (int64_t mult : ch_mult) {
    require(mult > 0 && (mult * ch) % norm_num_groups == 0,
            "VAEConfig: every level's channels must be > 0 and divisible by norm_num_groups");
  }
}

void CLIPTextConfig::validate() const {
  require(vocab_size > 0 && max_position_embeddings > 0, "CLIPTextConfig: sizes must be > 0");
  require(hidden_size > 0 && num_layers >= 1 && num_heads >= 1 && intermediate_size > 0,
          "CLIPTextConfig: hidden_size/num_layers/num_heads/intermediate_size must be > 0");
  require(hidden_size % num_heads == 0,
          "CLIPTextConfig: hidden_size must be divisible by num_heads");
  require(
      activation == "quick_gelu" || activation == "gelu",
      "CLIPTextConfig: activation must be \"quick_gelu\" or \"gelu\", got \"" + activation + "\"");
  require(layer_norm_eps > 0, "CLIPTextConfig: layer_norm_eps must be > 0");
}

std::vector<std::string> model_preset_names() { return {"sd15", "tiny"}; }

ModelPreset model_preset(const std::string& name) {
  ModelPreset preset;  // defaults are SD 1.5
  if (name == "sd15") return preset;
  if (name == "tiny") {
    UNetConfig& u = preset.unet;
    u.model_channels = 32;
    u.channel_mult = {1, 2};
    u.num_res_blocks = 1;
    u.attention_levels = {true, true};
    u.num_heads = 2;
    u.num_head_channels = -1;
    u.transformer_depth = 1;
    u.context_dim = 64;
    u.use_linear_in_transformer = false;
    u.norm_num_groups = 8;

    VAEConfig& v = preset.vae;
    v.ch = 16;
    v.ch_mult = {1, 2, 2, 2};
    v.num_res_blocks = 1;
    v.norm_num_groups = 8;

    CLIPTextConfig& t = preset.text;
    t.hidden_size = 64;
    t.num_layers = 2;
    t.num_heads = 2;
    t.intermediate_size = 128;
    t.activation = "quick_gelu";
    return preset;
  }
  std::string valid;
  for (const auto& n : model_preset_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model preset \"" + name + "\" (valid: " + valid + ")");
}

}  // namespace lf
