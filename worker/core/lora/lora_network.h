// A kohya-compatible LoRA network over the SD UNet and text encoders: one low-rank adapter per
// Linear / Conv inside every SpatialTransformer, text-encoder attention and MLP, and (with
// conv_dim, LoCon) every ResBlock / Downsample / Upsample, named with kohya's keys for SD 1.x,
// SD 2.x and SDXL (lora_naming.h). Mirrors networks.lora.LoRANetwork / LoRAModule of
// kohya-ss/sd-scripts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "lora/lora_naming.h"
#include "lora/lora_variants.h"
#include "model/clip_text_model.h"
#include "model/lora_compatible.h"
#include "model/sd_models.h"
#include "model/unet.h"

namespace lf {

// The LoRA-compatible conv class of the UNet: SD1's 1x1 proj_in/proj_out and, for LoCon, the
// ResBlock / Downsample / Upsample convs (any square kernel).
using LoRAConvLayerImpl = LoRACompatibleConvImpl;

// kohya network options (train_network.py --network_dim / --network_alpha, network_args
// conv_dim / conv_alpha, --network_train_unet_only / --network_train_text_encoder_only).
// The alpha a LoRA module of rank `rank` uses: `alpha`, or the rank when alpha is 0 (or not a
// positive number), so that its scale alpha / rank is 1. As kohya networks.lora LoRAModule
// ("if alpha is None or alpha == 0: alpha = lora_dim"), for configured and loaded alphas alike.
inline double kohya_alpha(double alpha, int64_t rank) {
  return alpha > 0 ? alpha : static_cast<double>(rank);
}

// One module's rank and alpha (alpha <= 0 means the rank).
struct LoRAModuleDim {
  int64_t rank = 0;
  double alpha = 0.0;
};

// The adapter of every module: kohya networks.lora's LoRA (lora_down / lora_up), LyCORIS LoHa
// (hada_w1_a / hada_w1_b / hada_w2_a / hada_w2_b, lycoris-lora LohaModule) or LyCORIS LoKr
// (lokr_w1 or lokr_w1_a / _b, lokr_w2 or lokr_w2_a / _b, LokrModule) or kohya networks.oft's OFT
// (oft_blocks, OFTModule: UNet only, modules named oft_unet_*); network.algo.
enum class LoRAAlgo { kLoRA, kLoHa, kLoKr, kOFT };

struct LoRANetworkOptions {
  LoRAAlgo algo = LoRAAlgo::kLoRA;
  int64_t lokr_factor = -1;     // LyCORIS LoKr factor (-1: the most balanced factorization)
  bool decompose_both = false;  // LyCORIS LoKr decompose_both: lokr_w1 low-rank too
  // LyCORIS dora_wd (any algo): each module also trains dora_scale, initialised to the row
  // norms of the layer's weight ([out, 1] / [out, 1, 1, 1], float32), as LyCORIS with
  // wd_on_output (its default).
  bool dora_wd = false;
  // kohya networks.oft network_args: targets beyond the attention projections (to_q, to_k, to_v,
  // to_out.0 of every CrossAttention): every Linear / 1x1 conv of each Transformer2DModel, and the
  // ResnetBlock2D / Downsample2D / Upsample2D layers.
  bool oft_enable_all_linear = false;
  bool oft_enable_conv = false;
  // OFT: network_dim is the number of blocks k of every module (it must divide the layer's
  // outputs) and network_alpha the constraint factor (constraint = alpha * out_dim), used as
  // given.
  int64_t network_dim = 4;     // rank of Linear and 1x1-conv modules, > 0
  double network_alpha = 1.0;  // <= 0 means network_dim (kohya: alpha None / 0 -> rank)
  int64_t conv_dim = 0;        // rank of k x k (k > 1) conv modules; 0 = no LoCon
  double conv_alpha = 1.0;     // <= 0 means conv_dim
  bool train_unet = true;
  bool train_text_encoder = true;
  // kohya's per-block ranks of the UNet (create_network with block_dims or a block lr weight),
  // indexed by kohya_block_index (lora_blocks.h): 25 entries for SD 1.x/2.x, 23 for SDXL, or
  // empty (off). When set, the UNet's Linear / 1x1 modules take block_dims / block_alphas of
  // their block and its k x k convs conv_block_dims / conv_block_alphas (LoCon; none when
  // empty); a rank of 0 leaves the module out. network_dim / conv_dim then only rank the text
  // encoders' modules.
  std::vector<int64_t> block_dims;
  std::vector<double> block_alphas;
  std::vector<int64_t> conv_block_dims;
  std::vector<double> conv_block_alphas;
  // kohya create_network_from_weights (--dim_from_weights): when non-empty, exactly these
  // modules (kohya names), each with its own rank and alpha; the ranks above are not used.
  std::map<std::string, LoRAModuleDim> module_dims;
  // Every module's training-time dropouts (kohya --network_dropout, rank_dropout,
  // module_dropout); they act only under a LoRADropoutScope (lora_dropout.h).
  LoRADropout dropout;
};

// kohya create_network_from_weights' modules_dim / modules_alpha: the rank (lora_down's first
// dimension; LoHa: hada_w1_b's, as LyCORIS make_module_from_state_dict) and alpha (".alpha",
// else the rank) of every module of kohya-named tensors, e.g. normalize_lora_state_dict's
// output. Throws std::invalid_argument for a lora_down / hada_w1_b of < 2 dims.
std::map<std::string, LoRAModuleDim> lora_module_dims(
    const std::map<std::string, torch::Tensor>& kohya_tensors);

// One text encoder to attach adapters to (HF CLIP module structure, also for open_clip weights).
struct LoRATextEncoderTarget {
  CLIPTextModel model{nullptr};
  std::string lora_prefix;  // "lora_te" (SD 1.x/2.x), "lora_te1" / "lora_te2" (SDXL)
  // Layers that get adapters: 0 = all. kohya's SD 2.x text encoder has 23 of open_clip's 24
  // layers (the last one is never used with the penultimate output), so its files hold 23 x 6.
  int64_t num_layers = 0;
};

// What load_weights / load_state_dict did.
struct LoRALoadReport {
  size_t loaded_modules = 0;
  std::vector<std::string> missing_modules;  // network modules absent from the file (fresh init)
  std::string variants;                      // layouts seen (normalize_lora_state_dict)
};

// The naming facts of `unet` read from its module tree: num_res_blocks and the levels from its
// config, the levels with attention from where its SpatialTransformers sit. ldm_names: SDXL.
UNetLoRANaming unet_lora_naming(UNetModel& unet, bool ldm_names);

// The text encoders of `models` as kohya's networks.lora targets them: each with its preset's
// lora_prefix, and SD 2.x's with its last layer left out (num_layers - 1).
std::vector<LoRATextEncoderTarget> kohya_text_encoder_targets(const SDModels& models);

class LoRANetwork {
 public:
  // Attaches an adapter to every kohya target layer: in the UNet (if options.train_unet) every
  // LoRA-compatible layer inside a SpatialTransformer, plus with conv_dim > 0 those inside
  // ResBlocks / Downsample / Upsample; in each text encoder (if options.train_text_encoder) the
  // self_attn q/k/v/out_proj and mlp fc1/fc2 of layers < num_layers. Linear and 1x1-conv modules
  // get network_dim / network_alpha, k x k convs conv_dim / conv_alpha, unless the options give
  // per-block or per-module ranks (block_dims, module_dims; with module_dims the UNet's
  // ResBlock layers are targets too); scale = alpha / rank.
  // In sorted kohya-name order (lora_te* before lora_unet*), lora_down ([r, in] or
  // [r, in, k, k]) is drawn U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in k k
  // (kaiming_uniform a = sqrt(5)), on `generator` (CPU); lora_up ([out, r] or [out, r, 1, 1]) is
  // zero; float32 on the layer's device, requiring grad. With algo kLoHa each module instead
  // gets LyCORIS LohaModule's init, drawn in its order on `generator`: hada_w1_b [r, in k k]
  // N(0, 1), hada_w1_a [out, r] N(0, 0.1^2), hada_w2_b N(0, 1), hada_w2_a zero (delta W starts
  // at 0). With kLoKr, init_lokr's factors (model/lokr.h) with lokr_factor / decompose_both;
  // a module whose halves are both full gets alpha = rank (scale 1), as LyCORIS. With kOFT, kohya
  // OFTNetwork's targets (UNet only, see oft_enable_*), each with zero oft_blocks
  // [k, out / k, out / k] (nothing drawn) and constraint alpha * out. Freezes every
  // UNet and text-encoder
  // parameter. Throws std::invalid_argument for network_dim <= 0, conv_dim < 0, nothing to train,
  // conv_dim > 0 with no LoRA-compatible ResBlock conv in `unet`, per-block lists of unequal
  // lengths or a UNet module outside them, duplicate names, or a layer that already carries an
  // adapter; for kOFT also for alpha <= 0, train_text_encoder without train_unet, and a layer
  // whose outputs network_dim does not divide.
  LoRANetwork(UNetModel& unet, const UNetLoRANaming& naming,
              const std::vector<LoRATextEncoderTarget>& text_encoders,
              const LoRANetworkOptions& options, at::Generator& generator);
  // SD 1.x/2.x UNet-only network (no text encoders, no LoCon), as before the options existed.
  LoRANetwork(UNetModel& unet, int64_t network_dim, double network_alpha, at::Generator& generator);
  // Detaches the adapters it attached (it keeps the target layers alive until then).
  ~LoRANetwork();
  LoRANetwork(const LoRANetwork&) = delete;
  LoRANetwork& operator=(const LoRANetwork&) = delete;

  // kohya lora_names of all modules, sorted.
  std::vector<std::string> module_names() const;
  // Trainable tensors, sorted by module name, lora_down before lora_up (LoHa: hada_w1_a,
  // hada_w1_b, hada_w2_a, hada_w2_b).
  std::vector<torch::Tensor> parameters() const;
  // The UNet (lora_unet_* / oft_unet_*) and lora_te* subsets of parameters(), same order
  // (kohya's unet_lr and text_encoder_lr parameter groups).
  std::vector<torch::Tensor> unet_parameters() const;
  std::vector<torch::Tensor> text_encoder_parameters() const;
  // Modules on the text encoders (the lora_te* ones text_encoder_parameters() collects).
  size_t num_text_encoder_modules() const;
  // Names of parameters() in the same order ("<lora_name>.lora_down.weight", ".lora_up.weight";
  // LoHa: "<lora_name>.hada_w1_a", ...).
  std::vector<std::string> parameter_names() const;
  // Total element count of parameters().
  size_t num_parameters() const;

  const LoRANetworkOptions& options() const { return options_; }
  int64_t network_dim() const { return options_.network_dim; }
  double network_alpha() const { return options_.network_alpha; }
  // network_alpha / network_dim as constructed (load_state_dict may set per-module alphas).
  double scale() const {
    return options_.network_alpha / static_cast<double>(options_.network_dim);
  }
  // kohya network multiplier (applied on top of scale); 1 by default.
  void set_multiplier(double multiplier);
  // Converts every lora_down / lora_up in place to `dtype` (kohya network.to(weight_dtype) for
  // full_fp16 / full_bf16): the tensors stay the same objects, so parameters() taken before
  // remain valid. Call before the optimizer is built.
  void set_dtype(at::ScalarType dtype);
  // How this network's keys look (for normalize_lora_state_dict).
  const LoRAKeyContext& key_context() const { return key_context_; }

  // kohya file layout: "<lora_name>.lora_down.weight", "<lora_name>.lora_up.weight" (detached,
  // sharing storage, in the parameters' dtype) and "<lora_name>.alpha" (0-dim float32). LoHa:
  // LyCORIS's "<lora_name>.hada_w1_a" / ".hada_w1_b" / ".hada_w2_a" / ".hada_w2_b" and ".alpha".
  // OFT: kohya's "<oft_name>.oft_blocks" and ".alpha" (the constraint factor).
  std::map<std::string, torch::Tensor> state_dict() const;

  // Copies a kohya state dict into the adapters in place (optimizer references stay valid) and
  // takes each module's alpha from "<lora_name>.alpha" (scale = alpha / rank; missing or 0 means
  // alpha = rank). A Linear [a, b] tensor loads into a 1x1 conv [a, b, 1, 1] and back (SD1
  // proj_in/out stored either way). Validates before copying; throws std::runtime_error listing
  // unexpected keys (with the family the file looks like when it is not this network's),
  // incomplete modules and shape mismatches (key, expected, found). Modules absent from
  // `weights` are an error too unless allow_missing_modules, when they keep their current
  // values and are listed in the report.
  LoRALoadReport load_state_dict(const std::map<std::string, torch::Tensor>& weights,
                                 bool allow_missing_modules = false);

  // Loads an existing LoRA file's tensors to continue training (kohya --network_weights): runs
  // normalize_lora_state_dict (every layout it accepts; its refusals propagate) with this
  // network's key context and `peft` alphas, then load_state_dict(..., allow_missing_modules =
  // true). Stricter than kohya's non-strict load: keys matching no module are an error, so no
  // trained weights are dropped silently; network modules the file lacks keep their fresh init
  // (a LoRA trained with fewer targets, e.g. without LoCon or text encoder, can be extended) and
  // are reported for the caller to log.
  LoRALoadReport load_weights(const std::map<std::string, torch::Tensor>& tensors,
                              const std::map<std::string, PeftAdapterConfig>& peft = {});

 private:
  // Hints appended to a failed load's message: network options that exclude the file's modules
  // (network_train_unet_only / text_encoder_only, conv_dim) and a rank that differs.
  std::string load_hints(const std::map<std::string, torch::Tensor>& weights,
                         const std::vector<std::string>& unexpected,
                         const std::vector<std::string>& mismatched) const;
  struct Module {
    std::shared_ptr<LoRAAdapter> adapter;
    int64_t rank;
    double alpha;
    std::shared_ptr<LoRACompatibleLinearImpl> linear;  // exactly one of linear / conv is set
    std::shared_ptr<LoRAConvLayerImpl> conv;
  };
  // The rank and alpha kohya gives module `name` (rank 0: no module).
  LoRAModuleDim module_dim(const std::string& name, bool unet, bool kxk) const;
  // True when the UNet's ResBlock / Downsample / Upsample layers are targets (kohya extends the
  // targets with conv_dim, conv_block_dims or weights to load the ranks from; OFT with
  // enable_conv).
  bool locon_targets() const;
  // Whether a layer inside a SpatialTransformer is a target: for OFT without enable_all_linear
  // (kohya OFTNetwork's default) only the CrossAttention projections; every layer otherwise.
  bool oft_targets(const std::string& ldm_layer_path) const;
  void add_module(const std::string& name, std::shared_ptr<torch::nn::Module> layer,
                  const std::string& where, bool unet);
  void init_adapters(at::Generator& generator);
  // The module's trainable tensors with their key suffixes, in parameters() order.
  static std::vector<std::pair<std::string, torch::Tensor*>> adapter_tensors(LoRAAdapter& a);

  LoRANetworkOptions options_;
  LoRAKeyContext key_context_;
  std::map<std::string, Module> modules_;  // by kohya lora_name
};

}  // namespace lf
