// Hyper-parameters of the Stable Diffusion networks the trainer builds (SD 1.x, SD 2.x, SDXL),
// the named presets, and family detection from a checkpoint's keys and shapes. Mirrors the ldm /
// sgm yaml configs (v1-inference.yaml, v2-inference-v.yaml, sd_xl_base.yaml: unet_config,
// first_stage_config ddconfig, cond_stage_config / conditioner) and transformers.CLIPTextConfig.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lf {

enum class ModelFamily { kSD1, kSD2, kSDXL };

// "sd1" | "sd2" | "sdxl".
std::string family_name(ModelFamily family);

// ldm/sgm openaimodel.UNetModel constructor arguments. Defaults are SD 1.5's.
struct UNetConfig {
  int64_t in_channels = 4;
  int64_t out_channels = 4;
  int64_t model_channels = 320;
  std::vector<int64_t> channel_mult = {1, 2, 4, 4};  // per level
  int64_t num_res_blocks = 2;                        // L, ResBlocks per input level
  // BasicTransformerBlocks per SpatialTransformer at each level; 0 = no SpatialTransformer
  // there (SD1/SD2 {1,1,1,0}, SDXL {0,2,10}).
  std::vector<int64_t> transformer_depth = {1, 1, 1, 0};
  int64_t transformer_depth_middle = 1;  // the middle block's SpatialTransformer (>= 1)
  int64_t num_heads = 8;           // fixed head count (SD1); -1 when num_head_channels is used
  int64_t num_head_channels = -1;  // fixed head dim (SD2/SDXL: 64); -1 when num_heads is used
  int64_t context_dim = 768;       // cross-attention context width
  bool use_linear_in_transformer = false;  // proj_in/out Linear (SD2/SDXL) or Conv 1x1 (SD1)
  int64_t norm_num_groups = 32;
  // SDXL vector conditioning ("num_classes: sequential"): label_emb.0.0 Linear(adm_in_channels
  // -> time_embed_dim), SiLU, label_emb.0.2 Linear, added to the time embedding. 0 = none.
  int64_t adm_in_channels = 0;
  // Width of the sinusoidal embedding of each of the 6 SDXL size/crop scalars (256 in SDXL).
  int64_t adm_time_embed_dim = 256;

  // 4 * model_channels, the width of the timestep embedding MLP.
  int64_t time_embed_dim() const { return 4 * model_channels; }
  // Number of attention heads of a SpatialTransformer with `channels` channels.
  int64_t heads_for(int64_t channels) const;
  // True when level `level` holds SpatialTransformers (transformer_depth[level] > 0).
  bool has_attention(int64_t level) const { return transformer_depth.at(level) > 0; }
  // Throws std::invalid_argument naming the first inconsistent field.
  void validate() const;
};

// ldm AutoencoderKL ddconfig. Defaults are SD 1.x's.
struct VAEConfig {
  int64_t ch = 128;
  std::vector<int64_t> ch_mult = {1, 2, 4, 4};  // per level; (levels - 1) down/upsamples
  int64_t num_res_blocks = 2;  // encoder blocks per level (the decoder has one more)
  int64_t z_channels = 4;      // latent channels (embed_dim == z_channels, double_z = true)
  int64_t in_channels = 3;     // image channels (also the decoder's out_ch)
  int64_t norm_num_groups = 32;
  double scale_factor = 0.18215;  // training latents = z * scale_factor (SDXL 0.13025)

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
  // text_projection (Linear hidden -> projection_dim, no bias) applied to the pooled output,
  // as CLIPTextModelWithProjection / open_clip's text_projection. 0 = none.
  int64_t projection_dim = 0;
  int64_t eos_token_id = 49407;  // the pooled output is taken at the first eos position

  // Throws std::invalid_argument naming the first inconsistent field.
  void validate() const;
};

// How a text encoder's weights are named in single-file checkpoints.
enum class TextEncoderLayout {
  kHF,        // transformers CLIPTextModel names (embeddings.*, encoder.layers.*)
  kOpenCLIP,  // open_clip names (token_embedding, transformer.resblocks.*, fused in_proj)
};

// One text encoder of a model and how the trainer conditions on it.
struct TextEncoderSpec {
  CLIPTextConfig config;
  TextEncoderLayout layout = TextEncoderLayout::kHF;
  std::string checkpoint_prefix;      // e.g. "cond_stage_model.transformer.text_model."
  int64_t hidden_layer_from_end = 1;  // 1 = last layer, 2 = penultimate
  bool apply_final_layer_norm = true;
  int64_t pad_token = 49407;  // 49407 for CLIP-L, 0 for open_clip
  std::string lora_prefix;    // kohya: "lora_te" (SD1/2), "lora_te1" / "lora_te2" (SDXL)
};

struct ModelPreset {
  std::string name;
  ModelFamily family = ModelFamily::kSD1;
  UNetConfig unet;
  VAEConfig vae;
  // In conditioning order: SDXL's context is te1 hidden ‖ te2 hidden (768 + 1280 = 2048).
  std::vector<TextEncoderSpec> text_encoders;
};

// Named presets:
//  "tiny": a CPU demo model, SD1-like (UNet 32ch x {1,2}, 1 res block, attention at both levels,
//          2 heads, context 64, 8 norm groups; VAE 16ch x {1,2,2,2} (x8); CLIP 64 wide, 2 layers).
//  "tiny-sd2": SD2-like (head dim 16, linear proj, open_clip text encoder 64 wide, 3 layers,
//          penultimate + final LN, pad 0).
//  "tiny-sdxl": SDXL-like (UNet 32ch x {1,2,2}, transformer_depth {0,1,2}, middle 2, context
//          112 = 48 + 64, adm 1568 = 32 + 6 x 256; te1 HF 48 wide, te2 open_clip 64 wide with
//          projection 32; VAE scale 0.13025).
//  "sd15": Stable Diffusion 1.5 (UNet 859,520,964 parameters).
//  "sd2": Stable Diffusion 2.x 512 / 768-v (same architecture; UNet 865,910,724 parameters).
//  "sdxl": SDXL base 1.0 (UNet 2,567,463,684 parameters).
// All presets use the full 49408-token vocabulary and 77 positions.
// Throws std::invalid_argument naming the preset and the valid names.
ModelPreset model_preset(const std::string& name);

// The names model_preset() accepts, sorted.
std::vector<std::string> model_preset_names();

// Checkpoint key -> shape (no tensor data), e.g. from a safetensors header.
using KeyShapes = std::map<std::string, std::vector<int64_t>>;

// The family of an original-layout single-file checkpoint, decided from keys and shapes as
// diffusers single_file_utils / stable-diffusion.cpp do: SDXL when second text-encoder keys
// ("conditioner.embedders.1." or "cond_stage_model.1.") sit beside the UNet keys (or, for a
// UNet-only file, label_emb with in-dim 2816); SD2 when a UNet attn2.to_k has in-dim 1024 or
// open_clip "cond_stage_model.model." keys exist; otherwise SD1. Throws std::runtime_error when
// there is no "model.diffusion_model." key (naming the prefixes found), and for inpainting
// (input_blocks.0.0.weight in-channels 9), instruct-pix2pix (8) and other label_emb models
// (SDXL refiner, unCLIP): "not supported".
ModelFamily detect_model_family(const KeyShapes& key_shapes);

// One summary line, e.g. "sdxl: UNet 2567463684 params, context 2048; text encoders: HF CLIP
// 768x12 (conditioner.embedders.0.transformer.text_model.), open_clip 1280x32 (...); VAE
// encoder+decoder".
std::string describe_checkpoint(const KeyShapes& key_shapes, ModelFamily family);

}  // namespace lf
