// LoRA-injectable Linear and Conv layers. They stand where ldm / HF use torch.nn.Linear and
// Conv2d, register exactly "weight" and "bias", and carry an optional low-rank adapter
// that is not a registered submodule; this mirrors the forward replacement kohya
// networks.lora.LoRAModule.apply_to() performs, without touching the base state dict.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/loha.h"
#include "model/lokr.h"
#include "model/lora_dropout.h"
#include "model/oft.h"

namespace lf {

// Both layer classes below compute in the input's dtype, or autocast's while it is on. A
// float8 weight (model.fp8_base) is upcast to that dtype for each call; the bias stays as it is.

// A low-rank update attached to one layer: out += multiplier * scale * up(down(x)).
// The tensors are owned by the LoRA network (they are the trainable parameters); they may have
// a different dtype than the base layer: the input is cast to down's dtype and the update back
// to the base output's dtype. While a training step's dropout stream is active
// (lora_dropout.h), `dropout` acts between down and up as in kohya LoRAModule.forward.
//
// With `loha` or `lokr` set (LyCORIS LoHa / LoKr) down and up stay undefined and the layer adds
// op(x, multiplier * delta W) instead, delta W from loha_delta_weight (model/loha.h) or
// lokr_delta_weight (model/lokr.h) with `scale`, as LyCORIS LohaModule / LokrModule.forward; of
// the dropouts only module dropout acts on them.
//
// With `oft` set (kohya networks.oft) the layer instead computes op(x, R W, bias), R W from
// oft_rotated_weight (model/oft.h) at `multiplier`, cast to the input's dtype; at multiplier 0
// the plain layer.
struct LoRAAdapter {
  torch::Tensor down;       // Linear [r, in]; Conv [r, in, k, k]
  torch::Tensor up;         // Linear [out, r]; Conv [out, r, 1, 1]
  LoHaFactors loha;         // LyCORIS LoHa: [out, r] / [r, in k k] factors (instead of down / up)
  LoKrFactors lokr;         // LyCORIS LoKr: Kronecker factors (instead of down / up)
  // LyCORIS dora_wd (DoRA, Liu et al. 2024): the per-output-row magnitude [out, 1] / [out, 1, 1, 1]
  // of the merged weight, as LyCORIS weight_decompose (wd_on_output): W' = (W + dW) *
  // (multiplier (m / (||W + dW||_row + eps) - 1) + 1), dW at `scale` without the multiplier;
  // the layer adds op(x, W' - W). Undefined: no DoRA.
  torch::Tensor dora_scale;
  OFTBlocks oft;  // kohya OFT: oft_blocks and constraint (instead of down / up)
  // True for LoHa / LoKr / DoRA, whose update is a full delta W rebuilt per forward.
  bool rebuilds_weight() const { return loha.defined() || lokr.defined() || dora_scale.defined(); }
  double scale = 1.0;       // alpha / r
  double multiplier = 1.0;  // kohya network multiplier
  LoRADropout dropout;      // kohya network_dropout / rank_dropout / module_dropout
};

// torch.nn.Linear with an optional LoRAAdapter.
class LoRACompatibleLinearImpl : public torch::nn::Module {
 public:
  // weight [out_features, in_features], bias [out_features] (if `bias`); initialised like
  // torch.nn.Linear (U(-1/sqrt(in), 1/sqrt(in)) from the global CPU generator).
  LoRACompatibleLinearImpl(int64_t in_features, int64_t out_features, bool bias = true);

  // x [..., in_features] -> [..., out_features].
  torch::Tensor forward(const torch::Tensor& x);

  // Attaches (or with nullptr detaches) an adapter. Throws std::invalid_argument when the
  // adapter shapes do not fit ([r, in] and [out, r]; LoHa / LoKr / OFT: *_shape_problem).
  void set_adapter(std::shared_ptr<LoRAAdapter> adapter);
  const std::shared_ptr<LoRAAdapter>& adapter() const { return adapter_; }

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  const torch::Tensor& weight() const { return weight_; }
  torch::Tensor& weight_mutable() { return weight_; }
  const torch::Tensor& bias() const { return bias_; }  // undefined when built without bias

 private:
  int64_t in_features_;
  int64_t out_features_;
  torch::Tensor weight_;
  torch::Tensor bias_;
  std::shared_ptr<LoRAAdapter> adapter_;
};
TORCH_MODULE(LoRACompatibleLinear);

// torch.nn.Conv2d(in, out, kernel_size=k, stride, padding) (square kernel, no dilation/groups)
// with an optional LoRAAdapter: SD1 proj_in/proj_out (1x1) and the UNet ResBlock / Downsample /
// Upsample convs (kohya LoCon targets). The adapter's down conv uses the layer's kernel, stride
// and padding ([r, in, k, k]); up is a 1x1 conv ([out, r, 1, 1]), as kohya LoRAModule builds it.
class LoRACompatibleConvImpl : public torch::nn::Module {
 public:
  // weight [out_channels, in_channels, k, k], bias [out_channels]; initialised like
  // torch.nn.Conv2d (U(-1/sqrt(in k k), 1/sqrt(in k k)) from the global CPU generator).
  LoRACompatibleConvImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size = 1,
                         int64_t stride = 1, int64_t padding = 0);

  // x [B, in_channels, H, W] -> [B, out_channels, H', W'] (H' = (H + 2p - k) / s + 1).
  torch::Tensor forward(const torch::Tensor& x);

  // Attaches (or with nullptr detaches) an adapter. Throws std::invalid_argument when the
  // adapter shapes do not fit ([r, in, k, k] and [out, r, 1, 1]; LoHa / LoKr / OFT:
  // *_shape_problem).
  void set_adapter(std::shared_ptr<LoRAAdapter> adapter);
  const std::shared_ptr<LoRAAdapter>& adapter() const { return adapter_; }

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  int64_t kernel_size() const { return kernel_size_; }
  int64_t stride() const { return stride_; }
  int64_t padding() const { return padding_; }
  const torch::Tensor& weight() const { return weight_; }
  torch::Tensor& weight_mutable() { return weight_; }
  const torch::Tensor& bias() const { return bias_; }

 private:
  int64_t in_channels_;
  int64_t out_channels_;
  int64_t kernel_size_;
  int64_t stride_;
  int64_t padding_;
  torch::Tensor weight_;
  torch::Tensor bias_;
  std::shared_ptr<LoRAAdapter> adapter_;
};
TORCH_MODULE(LoRACompatibleConv);

// True for the float8 dtypes (e4m3fn, e5m2 and their fnuz variants).
bool is_float8(at::ScalarType dtype);

// Stores the weight of every LoRA-compatible Linear / Conv inside `module` as `dtype` (kohya
// --fp8_base: float8_e4m3fn), biases unchanged. Returns the number of layers converted.
std::size_t set_matrix_dtype(torch::nn::Module& module, at::ScalarType dtype);

// The former 1x1-only name, kept for the LoRA network code: a LoRACompatibleConv built with
// the default kernel 1 is the old LoRACompatibleConv1x1.
using LoRACompatibleConv1x1Impl = LoRACompatibleConvImpl;
using LoRACompatibleConv1x1 = LoRACompatibleConv;

}  // namespace lf
