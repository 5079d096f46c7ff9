// Hyper-parameters of the three Stable Diffusion networks the trainer builds, and the named
// presets. Mirrors the ldm yaml configs (v1-inference.yaml: unet_config, first_stage_config
// ddconfig) and transformers.CLIPTextConfig.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lf {

// ldm.modules.diffusionmodules.openaimodel.UNetModel constructor arguments (SD 1.x/2.x family,
// no label_emb). Defaults are SD 1.5's.
struct UNetConfig {
  int64_t in_channels = 4;
  int64_t out_channels = 4;
  int64_t model_channels = 320;
  std::vector<int64_t> channel_mult = {1, 2, 4, 4};                // per level
  int64_t num_res_blocks = 2;                                      // L, ResBlocks per input level
  std::vector<bool> attention_levels = {true, true, true, false};  // per level
  int64_t num_heads = 8;           // fixed head count (SD1); -1 when num_head_channels is used
  int64_t num_head_channels = -1;  // fixed head dim (SD2/SDXL: 64); -1 when num_heads is used
  int64_t transformer_depth = 1;   // BasicTransformerBlocks per SpatialTransformer
  int64_t context_dim = 768;       // cross-attention context width
  bool use_linear_in_transformer = false;  // proj_in/proj_out Linear (SD2) or Conv 1x1 (SD1)
  int64_t norm_num_groups = 32;

  // 4 * model_channels, the width of the timestep embedding MLP.
  int64_t time_embed_dim() const { return 4 * model_channels; }
  // Number of attention heads of a SpatialTransformer with `channels` channels.
  int64_t heads_for(int64_t channels) const;
  // Throws std::invalid_argument naming the first inconsistent field.
  void validate() const;
};

// ldm AutoencoderKL ddconfig (encoder half is what the trainer uses). Defaults are SD 1.x's.
struct VAEConfig {
  int64_t ch = 128;
  std::vector<int64_t> ch_mult = {1, 2, 4, 4};  // per level; (levels - 1) downsamples
  int64_t num_res_blocks = 2;
  int64_t z_channels = 4;  // latent channels (embed_dim == z_channels, double_z = true)
  int64_t in_channels = 3;
  int64_t norm_num_groups = 32;
  double scale_factor = 0.18215;  // training latents = z * scale_factor

  // Spatial downsampling factor 2^(levels - 1): 8 for SD.
  int64_t downsample_factor() const;
  // Throws std::invalid_argument naming the first inconsistent field.
  void validate() const;
};

// transformers.CLIPTextConfig (text_model part). Defaults are CLIP ViT-L/14 (SD 1.x).
struct CLIPTextConfig {
  int64_t vocab_size = 49408;
  int64_t max_position_embeddings = 77;
  int64_t hidden_size = 768;
  int64_t num_layers = 12;
  int64_t num_heads = 12;
  int64_t intermediate_size = 3072;
  std::string activation = "quick_gelu";  // "quick_gelu" (x * sigmoid(1.702 x)) | "gelu" (erf)
  double layer_norm_eps = 1e-5;

  // Throws std::invalid_argument naming the first inconsistent field.
  void validate() const;
};

struct ModelPreset {
  UNetConfig unet;
  VAEConfig vae;
  CLIPTextConfig text;
};

// Named presets:
//  "tiny": a CPU demo model (UNet 32ch x {1,2}, 1 res block, attention at both levels, 2 heads,
//          context 64, 8 norm groups; VAE 16ch x {1,2,2,2} (x8 downsample); CLIP 64 wide,
//          2 layers, full 49408 vocab).
//  "sd15": Stable Diffusion 1.5 (UNet 859,520,964 parameters).
// Throws std::invalid_argument naming the preset and the valid names.
ModelPreset model_preset(const std::string& name);

// The names model_preset() accepts, sorted.
std::vector<std::string> model_preset_names();

}  // namespace lf
