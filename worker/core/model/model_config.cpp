// Validation of the model hyper-parameters, the named presets, and checkpoint family detection.
// Values follow ldm configs/stable-diffusion/v1-inference.yaml, v2-inference-v.yaml, sgm
// configs/inference/sd_xl_base.yaml, CLIP ViT-L/14 and OpenCLIP ViT-H/14, ViT-bigG/14.
#include "model/model_config.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>

namespace lf {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// CLIP ViT-L/14 text tower (SD1, SDXL te1): the CLIPTextConfig defaults.
CLIPTextConfig clip_l() { return CLIPTextConfig{}; }

CLIPTextConfig open_clip_text(int64_t width, int64_t layers, int64_t heads, int64_t mlp,
                              int64_t projection) {
  CLIPTextConfig c;
  c.hidden_size = width;
  c.num_layers = layers;
  c.num_heads = heads;
  c.intermediate_size = mlp;
  c.activation = "gelu";
  c.projection_dim = projection;
  return c;
}

TextEncoderSpec spec(CLIPTextConfig config, TextEncoderLayout layout, std::string prefix,
                     int64_t from_end, bool final_ln, int64_t pad, std::string lora_prefix) {
  TextEncoderSpec s;
  s.config = std::move(config);
  s.layout = layout;
  s.checkpoint_prefix = std::move(prefix);
  s.hidden_layer_from_end = from_end;
  s.apply_final_layer_norm = final_ln;
  s.pad_token = pad;
  s.lora_prefix = std::move(lora_prefix);
  return s;
}

constexpr const char* kSD1TextPrefix = "cond_stage_model.transformer.text_model.";
constexpr const char* kSD2TextPrefix = "cond_stage_model.model.";
constexpr const char* kSDXLText1Prefix = "conditioner.embedders.0.transformer.text_model.";
constexpr const char* kSDXLText2Prefix = "conditioner.embedders.1.model.";

// The UNet of the tiny presets before the family-specific changes.
UNetConfig tiny_unet() {
  UNetConfig u;
  u.model_channels = 32;
  u.channel_mult = {1, 2};
  u.num_res_blocks = 1;
  u.transformer_depth = {1, 1};
  u.transformer_depth_middle = 1;
  u.num_heads = 2;
  u.num_head_channels = -1;
  u.context_dim = 64;
  u.use_linear_in_transformer = false;
  u.norm_num_groups = 8;
  return u;
}

VAEConfig tiny_vae() {
  VAEConfig v;
  v.ch = 16;
  v.ch_mult = {1, 2, 2, 2};
  v.num_res_blocks = 1;
  v.norm_num_groups = 8;
  return v;
}

ModelPreset sd15() {
  ModelPreset p;
  p.name = "sd15";
  p.family = ModelFamily::kSD1;
  p.text_encoders = {
      spec(clip_l(), TextEncoderLayout::kHF, kSD1TextPrefix, 1, true, 49407, "lora_te")};
  return p;
}

ModelPreset sd2() {
  ModelPreset p;
  p.name = "sd2";
  p.family = ModelFamily::kSD2;
  p.unet.num_heads = -1;
  p.unet.num_head_channels = 64;
  p.unet.context_dim = 1024;
  p.unet.use_linear_in_transformer = true;
  p.text_encoders = {spec(open_clip_text(1024, 24, 16, 4096, 1024), TextEncoderLayout::kOpenCLIP,
                          kSD2TextPrefix, 2, true, 0, "lora_te")};
  return p;
}

ModelPreset sdxl() {
  ModelPreset p;
  p.name = "sdxl";
  p.family = ModelFamily::kSDXL;
  UNetConfig& u = p.unet;
  u.channel_mult = {1, 2, 4};
  u.transformer_depth = {0, 2, 10};
  u.transformer_depth_middle = 10;
  u.num_heads = -1;
  u.num_head_channels = 64;
  u.context_dim = 2048;
  u.use_linear_in_transformer = true;
  u.adm_in_channels = 2816;  // 1280 pooled + 6 x 256
  u.adm_time_embed_dim = 256;
  p.vae.scale_factor = 0.13025;
  p.text_encoders = {
      spec(clip_l(), TextEncoderLayout::kHF, kSDXLText1Prefix, 2, false, 49407, "lora_te1"),
      spec(open_clip_text(1280, 32, 20, 5120, 1280), TextEncoderLayout::kOpenCLIP, kSDXLText2Prefix,
           2, false, 0, "lora_te2")};
  return p;
}

ModelPreset tiny() {
  ModelPreset p;
  p.name = "tiny";
  p.family = ModelFamily::kSD1;
  p.unet = tiny_unet();
  p.vae = tiny_vae();
  CLIPTextConfig t;
  t.hidden_size = 64;
  t.num_layers = 2;
  t.num_heads = 2;
  t.intermediate_size = 128;
  t.activation = "quick_gelu";
  p.text_encoders = {spec(t, TextEncoderLayout::kHF, kSD1TextPrefix, 1, true, 49407, "lora_te")};
  return p;
}

ModelPreset tiny_sd2() {
  ModelPreset p;
  p.name = "tiny-sd2";
  p.family = ModelFamily::kSD2;
  p.unet = tiny_unet();
  p.unet.num_heads = -1;
  p.unet.num_head_channels = 16;
  p.unet.use_linear_in_transformer = true;
  p.vae = tiny_vae();
  p.text_encoders = {spec(open_clip_text(64, 3, 4, 256, 64), TextEncoderLayout::kOpenCLIP,
                          kSD2TextPrefix, 2, true, 0, "lora_te")};
  return p;
}

ModelPreset tiny_sdxl() {
  ModelPreset p;
  p.name = "tiny-sdxl";
  p.family = ModelFamily::kSDXL;
  UNetConfig& u = p.unet;
  u = tiny_unet();
  u.channel_mult = {1, 2, 2};
  u.transformer_depth = {0, 1, 2};
  u.transformer_depth_middle = 2;
  u.num_heads = -1;
  u.num_head_channels = 16;
  u.context_dim = 112;  // 48 (te1) + 64 (te2)
  u.use_linear_in_transformer = true;
  u.adm_in_channels = 1568;  // 32 pooled + 6 x 256
  u.adm_time_embed_dim = 256;
  p.vae = tiny_vae();
  p.vae.scale_factor = 0.13025;
  CLIPTextConfig t1;
  t1.hidden_size = 48;
  t1.num_layers = 3;
  t1.num_heads = 2;
  t1.intermediate_size = 96;
  t1.activation = "quick_gelu";
  p.text_encoders = {
      spec(t1, TextEncoderLayout::kHF, kSDXLText1Prefix, 2, false, 49407, "lora_te1"),
      spec(open_clip_text(64, 3, 4, 256, 32), TextEncoderLayout::kOpenCLIP, kSDXLText2Prefix, 2,
           false, 0, "lora_te2")};
  return p;
}

}  // namespace

std::string family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::kSD1:
      return "sd1";
    case ModelFamily::kSD2:
      return "sd2";
    case ModelFamily::kSDXL:
      return "sdxl";
  }
  return "unknown";
}

int64_t UNetConfig::heads_for(int64_t channels) const {
  if (num_head_channels > 0) return channels / num_head_channels;
  return num_heads;
}

void UNetConfig::validate() const {
  require(in_channels > 0 && out_channels > 0, "UNetConfig: in/out_channels must be > 0");
  require(model_channels > 0, "UNetConfig: model_channels must be > 0");
  require(!channel_mult.empty(), "UNetConfig: channel_mult must not be empty");
  require(transformer_depth.size() == channel_mult.size(),
          "UNetConfig: transformer_depth must have one entry per channel_mult level");
  require(num_res_blocks >= 1, "UNetConfig: num_res_blocks must be >= 1");
  for (int64_t d : transformer_depth) {
    require(d >= 0, "UNetConfig: transformer_depth entries must be >= 0");
  }
  require(transformer_depth_middle >= 1, "UNetConfig: transformer_depth_middle must be >= 1");
  require(context_dim > 0, "UNetConfig: context_dim must be > 0");
  require(norm_num_groups > 0, "UNetConfig: norm_num_groups must be > 0");
  require(adm_in_channels >= 0, "UNetConfig: adm_in_channels must be >= 0");
  require(adm_in_channels == 0 || adm_time_embed_dim > 0,
          "UNetConfig: adm_time_embed_dim must be > 0 when adm_in_channels is set");
  require((num_heads > 0) != (num_head_channels > 0),
          "UNetConfig: exactly one of num_heads / num_head_channels must be > 0");
  require(model_channels % norm_num_groups == 0,
          "UNetConfig: model_channels must be divisible by norm_num_groups");
  const size_t levels = channel_mult.size();
  for (size_t level = 0; level < levels; ++level) {
    const int64_t mult = channel_mult[level];
    require(mult > 0, "UNetConfig: channel_mult entries must be > 0");
    const int64_t ch = mult * model_channels;
    require(ch % norm_num_groups == 0,
            "UNetConfig: every level's channels must be divisible by norm_num_groups");
    if (transformer_depth[level] == 0 && level + 1 != levels) continue;  // no heads there
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
  require(projection_dim >= 0, "CLIPTextConfig: projection_dim must be >= 0");
  require(eos_token_id >= 0 && eos_token_id < vocab_size,
          "CLIPTextConfig: eos_token_id must be in [0, vocab_size)");
}

std::vector<std::string> model_preset_names() {
  return {"sd15", "sd2", "sdxl", "tiny", "tiny-sd2", "tiny-sdxl"};
}

ModelPreset model_preset(const std::string& name) {
  if (name == "sd15") return sd15();
  if (name == "sd2") return sd2();
  if (name == "sdxl") return sdxl();
  if (name == "tiny") return tiny();
  if (name == "tiny-sd2") return tiny_sd2();
  if (name == "tiny-sdxl") return tiny_sdxl();
  std::string valid;
  for (const auto& n : model_preset_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model preset \"" + name + "\" (valid: " + valid + ")");
}

namespace {

constexpr const char* kUNetPrefix = "model.diffusion_model.";

const std::vector<int64_t>* find_shape(const KeyShapes& ks, const std::string& key) {
  auto it = ks.find(key);
  return it == ks.end() ? nullptr : &it->second;
}

bool any_key_with_prefix(const KeyShapes& ks, const std::string& prefix) {
  auto it = ks.lower_bound(prefix);
  return it != ks.end() && starts_with(it->first, prefix);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

ModelFamily detect_model_family(const KeyShapes& ks) {
  if (!any_key_with_prefix(ks, kUNetPrefix)) {
    std::set<std::string> prefixes;
    for (const auto& kv : ks) prefixes.insert(kv.first.substr(0, kv.first.find('.')));
    std::string found;
    size_t n = 0;
    for (const auto& p : prefixes) {
      if (n++ == 8) {
        found += ", ...";
        break;
      }
      found += (found.empty() ? "" : ", ") + p;
    }
    throw std::runtime_error(
        "not a single-file Stable Diffusion checkpoint: no \"model.diffusion_model.\" (UNet) "
        "keys; top-level prefixes found: " +
        (found.empty() ? std::string("none (no tensors)") : found) +
        " (diffusers folders and UNet-only files in diffusers naming are not supported)");
  }
  if (const auto* conv_in = find_shape(ks, std::string(kUNetPrefix) + "input_blocks.0.0.weight")) {
    const int64_t in = conv_in->size() >= 2 ? (*conv_in)[1] : 0;
    if (in == 9) {
      throw std::runtime_error(
          "inpainting checkpoints are not supported (input_blocks.0.0.weight "
          "has 9 input channels)");
    }
    if (in == 8) {
      throw std::runtime_error(
          "instruct-pix2pix checkpoints are not supported "
          "(input_blocks.0.0.weight has 8 input channels)");
    }
  }
  const bool second_te = any_key_with_prefix(ks, "conditioner.embedders.1.") ||
                         any_key_with_prefix(ks, "cond_stage_model.1.");
  if (second_te) return ModelFamily::kSDXL;
  if (const auto* label = find_shape(ks, std::string(kUNetPrefix) + "label_emb.0.0.weight")) {
    if (label->size() == 2 && (*label)[1] == 2816) return ModelFamily::kSDXL;
    throw std::runtime_error("UNet with label_emb.0.0.weight " + shape_string(*label) +
                             " is not supported (SDXL refiner / unCLIP style models)");
  }
  if (any_key_with_prefix(ks, "cond_stage_model.model.")) return ModelFamily::kSD2;
  for (auto it = ks.lower_bound(kUNetPrefix); it != ks.end() && starts_with(it->first, kUNetPrefix);
       ++it) {
    if (ends_with(it->first, ".attn2.to_k.weight") && it->second.size() == 2 &&
        it->second[1] == 1024) {
      return ModelFamily::kSD2;
    }
  }
  return ModelFamily::kSD1;
}

std::string describe_checkpoint(const KeyShapes& ks, ModelFamily family) {
  auto numel = [](const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  };
  int64_t unet_params = 0, context = 0;
  for (auto it = ks.lower_bound(kUNetPrefix); it != ks.end() && starts_with(it->first, kUNetPrefix);
       ++it) {
    unet_params += numel(it->second);
    if (context == 0 && ends_with(it->first, ".attn2.to_k.weight") && it->second.size() == 2) {
      context = it->second[1];
    }
  }
  std::ostringstream out;
  out << family_name(family) << ": UNet " << unet_params << " params";
  if (context > 0) out << ", context " << context;

  // Text encoders: every known prefix with a token embedding; width and layer count.
  struct Candidate {
    const char* prefix;
    const char* layout;
    const char* embedding;
    const char* layer_marker;
  };
  const Candidate candidates[] = {
      {kSD1TextPrefix, "HF CLIP", "embeddings.token_embedding.weight", "encoder.layers."},
      {kSD2TextPrefix, "open_clip", "token_embedding.weight", "transformer.resblocks."},
      {kSDXLText1Prefix, "HF CLIP", "embeddings.token_embedding.weight", "encoder.layers."},
      {kSDXLText2Prefix, "open_clip", "token_embedding.weight", "transformer.resblocks."},
  };
  std::string text;
  for (const Candidate& c : candidates) {
    const auto* emb = find_shape(ks, std::string(c.prefix) + c.embedding);
    if (!emb || emb->size() != 2) continue;
    const std::string layer_prefix = std::string(c.prefix) + c.layer_marker;
    std::set<std::string> layers;
    for (auto it = ks.lower_bound(layer_prefix);
         it != ks.end() && starts_with(it->first, layer_prefix); ++it) {
      layers.insert(it->first.substr(
          layer_prefix.size(), it->first.find('.', layer_prefix.size()) - layer_prefix.size()));
    }
    text += (text.empty() ? "" : ", ") + std::string(c.layout) + " " + std::to_string((*emb)[1]) +
            "x" + std::to_string(layers.size()) + " (" + c.prefix + ")";
  }
  out << "; text encoders: " << (text.empty() ? std::string("none") : text);
  const bool enc = any_key_with_prefix(ks, "first_stage_model.encoder.");
  const bool dec = any_key_with_prefix(ks, "first_stage_model.decoder.");
  out << "; VAE "
      << (enc && dec ? "encoder+decoder"
          : enc      ? "encoder only"
          : dec      ? "decoder only"
                     : "absent");
  return out.str();
}

}  // namespace lf
