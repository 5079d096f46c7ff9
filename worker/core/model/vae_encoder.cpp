// ldm.modules.diffusionmodules.model ResnetBlock / AttnBlock / Downsample / Encoder and the
// AutoencoderKL.encode posterior (DiagonalGaussianDistribution.sample) for the SD VAE.
#include "model/vae_encoder.h"

#include <cmath>

#include <torch/torch.h>

#include "model/state_dict.h"

namespace lf {
namespace {

torch::nn::GroupNorm vae_norm(int64_t groups, int64_t channels) {
  return torch::nn::GroupNorm(torch::nn::GroupNormOptions(groups, channels).eps(1e-6));
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1,
                       int64_t padding = 0) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding));
}

// One level of the encoder: "block" (ModuleList of VAEResnetBlock) and optional "downsample".
class VAEDownLevelImpl : public torch::nn::Module {
 public:
  VAEDownLevelImpl(int64_t in_ch, int64_t out_ch, int64_t num_blocks, bool downsample,
                   int64_t groups) {
    block_ = register_module("block", torch::nn::ModuleList());
    for (int64_t j = 0; j < num_blocks; ++j) {
      block_->push_back(VAEResnetBlock(j == 0 ? in_ch : out_ch, out_ch, groups));
    }
    if (downsample) downsample_ = register_module("downsample", VAEDownsample(out_ch));
  }
  torch::Tensor forward(torch::Tensor h) {
    for (const auto& b : *block_) h = b->as<VAEResnetBlockImpl>()->forward(h);
    return downsample_ ? downsample_->forward(h) : h;
  }

 private:
  torch::nn::ModuleList block_{nullptr};
  VAEDownsample downsample_{nullptr};
};
TORCH_MODULE(VAEDownLevel);

}  // namespace

VAEResnetBlockImpl::VAEResnetBlockImpl(int64_t in_channels, int64_t out_channels,
                                       int64_t norm_num_groups) {
  norm1_ = register_module("norm1", vae_norm(norm_num_groups, in_channels));
  conv1_ = register_module("conv1", conv(in_channels, out_channels, 3, 1, 1));
  norm2_ = register_module("norm2", vae_norm(norm_num_groups, out_channels));
  conv2_ = register_module("conv2", conv(out_channels, out_channels, 3, 1, 1));
  if (in_channels != out_channels) {
    nin_shortcut_ = register_module("nin_shortcut", conv(in_channels, out_channels, 1));
  }
}

torch::Tensor VAEResnetBlockImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = conv1_->forward(torch::silu(norm1_->forward(x)));
  h = conv2_->forward(torch::silu(norm2_->forward(h)));  // dropout p = 0
  return (nin_shortcut_ ? nin_shortcut_->forward(x) : x) + h;
}

VAEAttnBlockImpl::VAEAttnBlockImpl(int64_t channels, int64_t norm_num_groups) {
  norm_ = register_module("norm", vae_norm(norm_num_groups, channels));
  q_ = register_module("q", conv(channels, channels, 1));
  k_ = register_module("k", conv(channels, channels, 1));
  v_ = register_module("v", conv(channels, channels, 1));
  proj_out_ = register_module("proj_out", conv(channels, channels, 1));
}

torch::Tensor VAEAttnBlockImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  torch::Tensor n = norm_->forward(x);
  // [B, C, H, W] -> [B, 1, H*W, C]: one head over all pixels, scale 1/sqrt(C).
  auto tokens = [](const torch::Tensor& t) { return t.flatten(2).transpose(1, 2).unsqueeze(1); };
  torch::Tensor out = at::scaled_dot_product_attention(
      tokens(q_->forward(n)), tokens(k_->forward(n)), tokens(v_->forward(n)));
  out = out.squeeze(1).transpose(1, 2).reshape({b, c, h, w});
  return x + proj_out_->forward(out);
}

VAEDownsampleImpl::VAEDownsampleImpl(int64_t channels) {
  conv_ = register_module("conv", conv(channels, channels, 3, /*stride=*/2, /*padding=*/0));
}

torch::Tensor VAEDownsampleImpl::forward(const torch::Tensor& x) {
  return conv_->forward(at::constant_pad_nd(x, {0, 1, 0, 1}, 0.0));
}

VAEEncoderBodyImpl::VAEEncoderBodyImpl(const VAEConfig& c) {
  const int64_t groups = c.norm_num_groups;
  const int64_t levels = static_cast<int64_t>(c.ch_mult.size());
  conv_in_ = register_module("conv_in", conv(c.in_channels, c.ch, 3, 1, 1));
  down_ = register_module("down", torch::nn::ModuleList());
  int64_t block_in = c.ch;
  for (int64_t level = 0; level < levels; ++level) {
    const int64_t block_out = c.ch * c.ch_mult[level];
    down_->push_back(
        VAEDownLevel(block_in, block_out, c.num_res_blocks, level != levels - 1, groups));
    block_in = block_out;
  }
  mid_ = register_module("mid", std::make_shared<torch::nn::Module>());
  mid_block_1_ = mid_->register_module("block_1", VAEResnetBlock(block_in, block_in, groups));
  mid_attn_1_ = mid_->register_module("attn_1", VAEAttnBlock(block_in, groups));
  mid_block_2_ = mid_->register_module("block_2", VAEResnetBlock(block_in, block_in, groups));
  norm_out_ = register_module("norm_out", vae_norm(groups, block_in));
  conv_out_ = register_module("conv_out", conv(block_in, 2 * c.z_channels, 3, 1, 1));
}

torch::Tensor VAEEncoderBodyImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = conv_in_->forward(x);
  for (const auto& level : *down_) h = level->as<VAEDownLevelImpl>()->forward(h);
  h = mid_block_2_->forward(mid_attn_1_->forward(mid_block_1_->forward(h)));
  return conv_out_->forward(torch::silu(norm_out_->forward(h)));
}

VAEEncoderImpl::VAEEncoderImpl(const VAEConfig& config) : config_(config) {
  config_.validate();
  encoder_ = register_module("encoder", VAEEncoderBody(config_));
  quant_conv_ =
      register_module("quant_conv", conv(2 * config_.z_channels, 2 * config_.z_channels, 1));
  freeze_parameters(*this);
}

LatentDistribution VAEEncoderImpl::encode(const torch::Tensor& x) {
  torch::Tensor moments = quant_conv_->forward(encoder_->forward(x));
  std::vector<torch::Tensor> parts = moments.chunk(2, /*dim=*/1);
  return {parts[0], parts[1].clamp(-30.0, 20.0)};
}

torch::Tensor VAEEncoderImpl::sample_latents(const LatentDistribution& posterior,
                                             at::Generator& generator) {
  const torch::Tensor& mean = posterior.mean;
  torch::Tensor eps = torch::randn(mean.sizes(), generator, torch::dtype(torch::kFloat32))
                          .to(mean.device(), mean.scalar_type());
  torch::Tensor z = mean + torch::exp(0.5 * posterior.logvar) * eps;
  return z * config_.scale_factor;
}

torch::Tensor VAEEncoderImpl::sample_latents(const torch::Tensor& x, at::Generator& generator) {
  return sample_latents(encode(x), generator);
}

void load_state_dict(VAEEncoder& vae, const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix) {
  auto ignorable = [](const std::string& key) {
    return key.rfind("decoder.", 0) == 0 || key.rfind("post_quant_conv.", 0) == 0 ||
           key.rfind("loss.", 0) == 0;
  };
  load_module_weights(*vae, weights, prefix, ignorable, "VAEEncoder");
}

}  // namespace lf
