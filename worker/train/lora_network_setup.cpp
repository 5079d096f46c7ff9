// kohya's network options for the LoRANetwork (see header).
#include "worker/train/lora_network_setup.h"

#include <stdexcept>

#include "common/config/kohya_blocks.h"
#include "worker/io/lora_file.h"

namespace lf {
namespace {

template <typename To, typename From>
std::vector<To> converted(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

// "network.block_dims: expected ..." -> "<source>: key 'network.block_dims': expected ...".
[[noreturn]] void throw_config_error(const JobConfig& config, const std::string& what) {
  const auto colon = what.find(": ");
  throw ConfigError(config.source_name + ": key '" + what.substr(0, colon) +
                    "': " + what.substr(colon + 2));
}

}  // namespace

LoRANetworkSetup lora_network_setup(const JobConfig& config, SDModels& models) {
  const NetworkSection& net = config.network;
  const bool sdxl = models.preset.family == ModelFamily::kSDXL;
  LoRANetworkSetup setup;
  LoRANetworkOptions& o = setup.options;
  // job_keys.h: lora | loha | lokr | oft
  o.algo = net.algo == "loha"   ? LoRAAlgo::kLoHa
           : net.algo == "lokr" ? LoRAAlgo::kLoKr
           : net.algo == "oft"  ? LoRAAlgo::kOFT
                                : LoRAAlgo::kLoRA;
  o.oft_enable_all_linear = net.enable_all_linear;
  o.oft_enable_conv = net.enable_conv;
  o.lokr_factor = net.factor;
  o.decompose_both = net.decompose_both;
  o.dora_wd = net.dora_wd;
  o.network_dim = net.network_dim;
  o.network_alpha = net.network_alpha;
  o.conv_dim = net.conv_dim;
  o.conv_alpha = net.conv_alpha;
  // kohya: a part whose own lr is set to 0 is not trained (no modules, the text cache stays on).
  o.train_unet = net.trains_unet();
  o.train_text_encoder = net.trains_text_encoder();
  o.dropout.dropout = net.network_dropout.value_or(0.0);
  o.dropout.rank_dropout = net.rank_dropout.value_or(0.0);
  o.dropout.module_dropout = net.module_dropout.value_or(0.0);
  try {
    const KohyaBlockLrWeights lr = kohya_block_lr_weights(net, sdxl);
    setup.notes = lr.notes;
    const KohyaBlockDims blocks = kohya_block_dims(net, sdxl, lr.weights);
    if (blocks.active && !net.dim_from_weights) {
      o.block_dims = converted<int64_t>(blocks.dims);
      o.block_alphas = blocks.alphas;
      o.conv_block_dims = converted<int64_t>(blocks.conv_dims);
      o.conv_block_alphas = blocks.conv_alphas;
    }
  } catch (const std::invalid_argument& e) {
    throw_config_error(config, e.what());
  }
  if (net.dim_from_weights) {
    LoRAKeyContext ctx;
    ctx.unet = unet_lora_naming(models.unet, sdxl);
    for (const auto& te : kohya_text_encoder_targets(models)) {
      ctx.text_encoder_prefixes.push_back(te.lora_prefix);
    }
    o.module_dims = network_weights_module_dims(net.network_weights, ctx);
    if (o.module_dims.empty()) {
      throw ConfigError(config.source_name + ": key 'network.dim_from_weights': " +
                        net.network_weights + " holds no LoRA module to take the ranks from");
    }
  }
  return setup;
}

}  // namespace lf
