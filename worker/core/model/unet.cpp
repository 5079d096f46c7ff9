// ldm / sgm openaimodel: timestep_embedding, ResBlock, Downsample, Upsample,
// TimestepEmbedSequential and UNetModel (SD 1.x/2.x/XL wiring for any num_res_blocks), and the
// SDXL vector conditioning.
#include "model/unet.h"

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

#include "model/state_dict.h"

namespace lf {
namespace {

torch::nn::GroupNorm group_norm(int64_t groups, int64_t channels, double eps) {
  return torch::nn::GroupNorm(torch::nn::GroupNormOptions(groups, channels).eps(eps));
}

torch::nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1));
}

LoRACompatibleConv lora_conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return LoRACompatibleConv(in, out, /*kernel_size=*/3, stride, /*padding=*/1);
}

std::string shape_of(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

}  // namespace

torch::Tensor timestep_embedding(const torch::Tensor& timesteps, int64_t dim, double max_period) {
  const int64_t half = dim / 2;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(timesteps.device());
  torch::Tensor freqs = torch::exp(-std::log(max_period) * torch::arange(0, half, f32) / half);
  torch::Tensor args = timesteps.to(torch::kFloat32).unsqueeze(1) * freqs.unsqueeze(0);
  torch::Tensor embedding = torch::cat({torch::cos(args), torch::sin(args)}, /*dim=*/-1);
  if (dim % 2 == 1) {
    embedding = torch::cat({embedding, torch::zeros({embedding.size(0), 1}, f32)}, -1);
  }
  return embedding;
}

torch::Tensor sdxl_vector_conditioning(const torch::Tensor& pooled, const torch::Tensor& size_cond,
                                       int64_t adm_time_embed_dim) {
  if (pooled.dim() != 2 || size_cond.dim() != 2 || size_cond.size(1) != 6 ||
      size_cond.size(0) != pooled.size(0) || adm_time_embed_dim <= 0) {
    throw std::invalid_argument(
        "sdxl_vector_conditioning: expected pooled [B, P] and size_cond "
        "[B, 6] with adm_time_embed_dim > 0, got pooled " +
        shape_of(pooled) + ", size_cond " + shape_of(size_cond) + ", dim " +
        std::to_string(adm_time_embed_dim));
  }
  const int64_t b = pooled.size(0);
  torch::Tensor emb = timestep_embedding(size_cond.reshape({-1}), adm_time_embed_dim)
                          .reshape({b, 6 * adm_time_embed_dim})
                          .to(pooled.device(), pooled.scalar_type());
  return torch::cat({pooled, emb}, /*dim=*/1);
}

ResBlockImpl::ResBlockImpl(int64_t in_channels, int64_t out_channels, int64_t emb_channels,
                           int64_t norm_num_groups) {
  in_layers_ = register_module(
      "in_layers",
      torch::nn::Sequential(group_norm(norm_num_groups, in_channels, 1e-5), torch::nn::SiLU(),
                            lora_conv3x3(in_channels, out_channels)));
  emb_layers_ = register_module(
      "emb_layers",
      torch::nn::Sequential(torch::nn::SiLU(), LoRACompatibleLinear(emb_channels, out_channels)));
  out_layers_ = register_module(
      "out_layers",
      torch::nn::Sequential(group_norm(norm_num_groups, out_channels, 1e-5), torch::nn::SiLU(),
                            torch::nn::Identity(),  // index 2: dropout (p = 0)
                            lora_conv3x3(out_channels, out_channels)));
  if (in_channels != out_channels) {
    skip_connection_ =
        register_module("skip_connection", LoRACompatibleConv(in_channels, out_channels));
  }
}

torch::Tensor ResBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& emb) {
  return run_block(
      *this, [this](const std::vector<torch::Tensor>& in) { return forward_block(in[0], in[1]); },
      {x, emb});
}

torch::Tensor ResBlockImpl::forward_block(const torch::Tensor& x, const torch::Tensor& emb) {
  torch::Tensor h = in_layers_->forward(x);
  torch::Tensor emb_out = emb_layers_->forward(emb).to(h.scalar_type());
  h = h + emb_out.unsqueeze(-1).unsqueeze(-1);
  h = out_layers_->forward(h);
  return (skip_connection_ ? skip_connection_->forward(x) : x) + h;
}

DownsampleImpl::DownsampleImpl(int64_t channels) {
  op_ = register_module("op", lora_conv3x3(channels, channels, /*stride=*/2));
}

torch::Tensor DownsampleImpl::forward(const torch::Tensor& x) { return op_->forward(x); }

UpsampleImpl::UpsampleImpl(int64_t channels) {
  conv_ = register_module("conv", lora_conv3x3(channels, channels));
}

torch::Tensor UpsampleImpl::forward(const torch::Tensor& x,
                                    c10::optional<std::vector<int64_t>> size) {
  namespace F = torch::nn::functional;
  const bool doubled = !size || ((*size)[0] == 2 * x.size(2) && (*size)[1] == 2 * x.size(3));
  torch::Tensor up;
  if (!doubled) {
    up = F::interpolate(x, F::InterpolateFuncOptions().size(*size).mode(torch::kNearest));
  } else if (x.is_cuda() && at::globalContext().deterministicAlgorithms()) {
    // CUDA's nearest-upsampling backward accumulates with atomics; a broadcast view repeats
    // every pixel 2x2 the same way and its backward is a deterministic sum.
    const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    up = x.reshape({b, c, h, 1, w, 1}).expand({b, c, h, 2, w, 2}).reshape({b, c, 2 * h, 2 * w});
  } else {
    up = F::interpolate(x, F::InterpolateFuncOptions()
                               .scale_factor(std::vector<double>{2.0, 2.0})
                               .mode(torch::kNearest));
  }
  return conv_->forward(up);
}

void TimestepEmbedSequentialImpl::add(Kind kind, std::shared_ptr<torch::nn::Module> module) {
  register_module(std::to_string(layers_.size()), module);
  layers_.emplace_back(kind, std::move(module));
}

void TimestepEmbedSequentialImpl::push_back(torch::nn::Conv2d conv) {
  add(Kind::kConv, conv.ptr());
}
void TimestepEmbedSequentialImpl::push_back(ResBlock block) { add(Kind::kResBlock, block.ptr()); }
void TimestepEmbedSequentialImpl::push_back(SpatialTransformer transformer) {
  add(Kind::kTransformer, transformer.ptr());
}
void TimestepEmbedSequentialImpl::push_back(Downsample down) { add(Kind::kDownsample, down.ptr()); }
void TimestepEmbedSequentialImpl::push_back(Upsample up) { add(Kind::kUpsample, up.ptr()); }

torch::Tensor TimestepEmbedSequentialImpl::forward(
    const torch::Tensor& x, const torch::Tensor& emb, const torch::Tensor& context,
    c10::optional<std::vector<int64_t>> upsample_size) {
  torch::Tensor h = x;
  for (const auto& layer : layers_) {
    switch (layer.first) {
      case Kind::kConv:
        h = static_cast<torch::nn::Conv2dImpl&>(*layer.second).forward(h);
        break;
      case Kind::kResBlock:
        h = static_cast<ResBlockImpl&>(*layer.second).forward(h, emb);
        break;
      case Kind::kTransformer:
        h = static_cast<SpatialTransformerImpl&>(*layer.second).forward(h, context);
        break;
      case Kind::kDownsample:
        h = static_cast<DownsampleImpl&>(*layer.second).forward(h);
        break;
      case Kind::kUpsample:
        h = static_cast<UpsampleImpl&>(*layer.second).forward(h, upsample_size);
        break;
    }
  }
  return h;
}

UNetModelImpl::UNetModelImpl(const UNetConfig& config) : config_(config) {
  config_.validate();
  const UNetConfig& c = config_;
  const int64_t mc = c.model_channels;
  const int64_t emb_dim = c.time_embed_dim();
  const int64_t groups = c.norm_num_groups;
  const int64_t levels = static_cast<int64_t>(c.channel_mult.size());
  auto transformer = [&](int64_t ch, int64_t depth) {
    const int64_t heads = c.heads_for(ch);
    return SpatialTransformer(ch, heads, ch / heads, depth, c.context_dim,
                              c.use_linear_in_transformer, groups);
  };

  time_embed_ = register_module(
      "time_embed", torch::nn::Sequential(torch::nn::Linear(mc, emb_dim), torch::nn::SiLU(),
                                          torch::nn::Linear(emb_dim, emb_dim)));
  if (c.adm_in_channels > 0) {
    // sgm num_classes == "sequential": label_emb = Sequential(Sequential(Linear, SiLU, Linear)).
    label_mlp_ = torch::nn::Sequential(torch::nn::Linear(c.adm_in_channels, emb_dim),
                                       torch::nn::SiLU(), torch::nn::Linear(emb_dim, emb_dim));
    label_emb_ = register_module("label_emb", torch::nn::ModuleList(label_mlp_));
  }

  input_blocks_ = register_module("input_blocks", torch::nn::ModuleList());
  std::vector<int64_t> skip_channels;  // channels of every input block output, in order
  {
    TimestepEmbedSequential first;
    first->push_back(conv3x3(c.in_channels, mc));
    input_blocks_->push_back(first);
    skip_channels.push_back(mc);
  }
  int64_t ch = mc;
  for (int64_t level = 0; level < levels; ++level) {
    for (int64_t j = 0; j < c.num_res_blocks; ++j) {
      TimestepEmbedSequential block;
      const int64_t out_ch = c.channel_mult[level] * mc;
      block->push_back(ResBlock(ch, out_ch, emb_dim, groups));
      ch = out_ch;
      if (c.has_attention(level)) block->push_back(transformer(ch, c.transformer_depth[level]));
      input_blocks_->push_back(block);
      skip_channels.push_back(ch);
    }
    if (level != levels - 1) {
      TimestepEmbedSequential down;
      down->push_back(Downsample(ch));
      input_blocks_->push_back(down);
      skip_channels.push_back(ch);
    }
  }

  middle_block_ = register_module("middle_block", TimestepEmbedSequential());
  middle_block_->push_back(ResBlock(ch, ch, emb_dim, groups));
  middle_block_->push_back(transformer(ch, c.transformer_depth_middle));
  middle_block_->push_back(ResBlock(ch, ch, emb_dim, groups));

  output_blocks_ = register_module("output_blocks", torch::nn::ModuleList());
  for (int64_t level = levels - 1; level >= 0; --level) {
    for (int64_t j = 0; j <= c.num_res_blocks; ++j) {
      TimestepEmbedSequential block;
      const int64_t skip = skip_channels.back();
      skip_channels.pop_back();
      const int64_t out_ch = c.channel_mult[level] * mc;
      block->push_back(ResBlock(ch + skip, out_ch, emb_dim, groups));
      ch = out_ch;
      if (c.has_attention(level)) block->push_back(transformer(ch, c.transformer_depth[level]));
      if (level != 0 && j == c.num_res_blocks) block->push_back(Upsample(ch));
      output_blocks_->push_back(block);
    }
  }

  out_ =
      register_module("out", torch::nn::Sequential(group_norm(groups, ch, 1e-5), torch::nn::SiLU(),
                                                   conv3x3(ch, c.out_channels)));
  freeze_parameters(*this);
}

torch::Tensor UNetModelImpl::forward(const torch::Tensor& x, const torch::Tensor& timesteps,
                                     const torch::Tensor& context, const torch::Tensor& y) {
  const int64_t adm = config_.adm_in_channels;
  if (adm > 0 && (!y.defined() || y.dim() != 2 || y.size(0) != x.size(0) || y.size(1) != adm)) {
    throw std::invalid_argument("UNetModel: this model needs y [B, " + std::to_string(adm) +
                                "] (SDXL vector conditioning), got " +
                                (y.defined() ? shape_of(y) : std::string("none")) +
                                " for B = " + std::to_string(x.size(0)));
  }
  if (adm == 0 && y.defined()) {
    throw std::invalid_argument(
        "UNetModel: y given but the model has no label_emb "
        "(adm_in_channels 0)");
  }
  const torch::Tensor& w0 = time_embed_->ptr(0)->as<torch::nn::LinearImpl>()->weight;
  torch::Tensor t_emb =
      timestep_embedding(timesteps, config_.model_channels).to(w0.device(), w0.scalar_type());
  torch::Tensor emb = time_embed_->forward(t_emb);
  if (adm > 0) emb = emb + label_mlp_->forward(y.to(w0.device(), w0.scalar_type()));

  std::vector<torch::Tensor> hs;
  hs.reserve(input_blocks_->size());
  torch::Tensor h = x;
  for (const auto& block : *input_blocks_) {
    h = block->as<TimestepEmbedSequentialImpl>()->forward(h, emb, context);
    hs.push_back(h);
  }
  h = middle_block_->forward(h, emb, context);
  for (const auto& block : *output_blocks_) {
    h = torch::cat({h, hs.back()}, /*dim=*/1);
    hs.pop_back();
    // An upsample at the end of this block meets the next skip connection's size.
    c10::optional<std::vector<int64_t>> size;
    if (!hs.empty()) size = std::vector<int64_t>{hs.back().size(2), hs.back().size(3)};
    h = block->as<TimestepEmbedSequentialImpl>()->forward(h, emb, context, size);
  }
  return out_->forward(h);
}

std::size_t UNetModelImpl::set_gradient_checkpointing(bool on) {
  return lf::set_gradient_checkpointing(*this, on);
}

void load_state_dict(UNetModel& unet, const std::unordered_map<std::string, torch::Tensor>& weights,
                     const std::string& prefix) {
  load_module_weights(*unet, weights, prefix, /*is_ignorable=*/nullptr, "UNetModel");
}

}  // namespace lf
