// ldm.modules.diffusionmodules.model Decoder / Upsample and AutoencoderKL.decode for the SD VAE.
#include "model/vae_decoder.h"

#include <torch/torch.h>

#include "model/state_dict.h"

namespace lf {
namespace {

torch::nn::GroupNorm vae_norm(int64_t groups, int64_t channels) {
  return torch::nn::GroupNorm(torch::nn::GroupNormOptions(groups, channels).eps(1e-6));
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t padding = 0) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).padding(padding));
}

// One level of the decoder: "block" (L + 1 VAEResnetBlocks) and optional "upsample".
class VAEUpLevelImpl : public torch::nn::Module {
 public:
  VAEUpLevelImpl(int64_t in_ch, int64_t out_ch, int64_t num_blocks, bool upsample, int64_t groups) {
    block_ = register_module("block", torch::nn::ModuleList());
    for (int64_t j = 0; j < num_blocks; ++j) {
      block_->push_back(VAEResnetBlock(j == 0 ? in_ch : out_ch, out_ch, groups));
    }
    if (upsample) upsample_ = register_module("upsample", VAEUpsample(out_ch));
  }
  torch::Tensor forward(torch::Tensor h) {
    for (const auto& b : *block_) h = b->as<VAEResnetBlockImpl>()->forward(h);
    return upsample_ ? upsample_->forward(h) : h;
  }

 private:
  torch::nn::ModuleList block_{nullptr};
  VAEUpsample upsample_{nullptr};
};
TORCH_MODULE(VAEUpLevel);

}  // namespace

VAEUpsampleImpl::VAEUpsampleImpl(int64_t channels) {
  conv_ = register_module("conv", conv(channels, channels, 3, 1));
}

torch::Tensor VAEUpsampleImpl::forward(const torch::Tensor& x) {
  namespace F = torch::nn::functional;
  return conv_->forward(F::interpolate(x, F::InterpolateFuncOptions()
                                              .scale_factor(std::vector<double>{2.0, 2.0})
                                              .mode(torch::kNearest)));
}

VAEDecoderBodyImpl::VAEDecoderBodyImpl(const VAEConfig& c) {
  const int64_t groups = c.norm_num_groups;
  const int64_t levels = static_cast<int64_t>(c.ch_mult.size());
  const int64_t top = c.ch * c.ch_mult.back();
  conv_in_ = register_module("conv_in", conv(c.z_channels, top, 3, 1));
  mid_ = register_module("mid", std::make_shared<torch::nn::Module>());
  mid_block_1_ = mid_->register_module("block_1", VAEResnetBlock(top, top, groups));
  mid_attn_1_ = mid_->register_module("attn_1", VAEAttnBlock(top, groups));
  mid_block_2_ = mid_->register_module("block_2", VAEResnetBlock(top, top, groups));
  // ldm builds the levels from the top down and inserts each at the front, so up.I is level I;
  // level I's first block takes the channels of level I + 1 (the top level: its own).
  up_ = register_module("up", torch::nn::ModuleList());
  for (int64_t level = 0; level < levels; ++level) {
    const int64_t in_ch = c.ch * c.ch_mult[std::min(level + 1, levels - 1)];
    up_->push_back(
        VAEUpLevel(in_ch, c.ch * c.ch_mult[level], c.num_res_blocks + 1, level != 0, groups));
  }
  norm_out_ = register_module("norm_out", vae_norm(groups, c.ch * c.ch_mult[0]));
  conv_out_ = register_module("conv_out", conv(c.ch * c.ch_mult[0], c.in_channels, 3, 1));
}

torch::Tensor VAEDecoderBodyImpl::forward(const torch::Tensor& z) {
  torch::Tensor h = conv_in_->forward(z);
  h = mid_block_2_->forward(mid_attn_1_->forward(mid_block_1_->forward(h)));
  for (int64_t level = static_cast<int64_t>(up_->size()) - 1; level >= 0; --level) {
    h = up_->ptr(level)->as<VAEUpLevelImpl>()->forward(h);
  }
  return conv_out_->forward(torch::silu(norm_out_->forward(h)));
}

VAEDecoderImpl::VAEDecoderImpl(const VAEConfig& config) : config_(config) {
  config_.validate();
  // Registration order follows AutoencoderKL (decoder before post_quant_conv).
  decoder_ = register_module("decoder", VAEDecoderBody(config_));
  post_quant_conv_ =
      register_module("post_quant_conv", conv(config_.z_channels, config_.z_channels, 1));
  freeze_parameters(*this);
}

torch::Tensor VAEDecoderImpl::decode(const torch::Tensor& latents) {
  return decoder_->forward(post_quant_conv_->forward(latents / config_.scale_factor));
}

void load_state_dict(VAEDecoder& vae, const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix) {
  auto ignorable = [](const std::string& key) {
    return key.rfind("encoder.", 0) == 0 || key.rfind("quant_conv.", 0) == 0 ||
           key.rfind("loss.", 0) == 0;
  };
  load_module_weights(*vae, weights, prefix, ignorable, "VAEDecoder");
}

}  // namespace lf
