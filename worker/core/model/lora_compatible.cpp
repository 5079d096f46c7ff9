// LoRA-injectable Linear / Conv: base projection plus multiplier * scale * up(down(x)),
// the forward of kohya networks.lora.LoRAModule (without dropout variants).
#include "model/lora_compatible.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

namespace lf {
namespace {

// torch.nn.Linear / Conv2d reset_parameters(): kaiming_uniform(a = sqrt(5)) gives
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the weight, and the bias uses the same bound.
void init_like_torch(torch::Tensor& weight, torch::Tensor& bias, int64_t fan_in) {
  torch::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  weight.uniform_(-bound, bound);
  if (bias.defined()) bias.uniform_(-bound, bound);
}

std::string shape_of(const torch::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// kernel 0 means a Linear layer; otherwise a conv with a square kernel of that size.
void check_adapter(const LoRAAdapter& a, int64_t in, int64_t out, int64_t kernel) {
  const bool conv = kernel > 0;
  const int64_t dims = conv ? 4 : 2;
  const bool ok = a.down.defined() && a.up.defined() && a.down.dim() == dims &&
                  a.up.dim() == dims && a.down.size(1) == in && a.up.size(0) == out &&
                  a.up.size(1) == a.down.size(0) &&
                  (!conv || (a.down.size(2) == kernel && a.down.size(3) == kernel &&
                             a.up.size(2) == 1 && a.up.size(3) == 1));
  if (!ok) {
    throw std::invalid_argument(
        "LoRA adapter shapes down " + shape_of(a.down) + " / up " + shape_of(a.up) +
        " do not fit a layer with in=" + std::to_string(in) + ", out=" + std::to_string(out));
  }
}

}  // namespace

LoRACompatibleLinearImpl::LoRACompatibleLinearImpl(int64_t in_features, int64_t out_features,
                                                   bool bias)
    : in_features_(in_features), out_features_(out_features) {
  weight_ = register_parameter("weight", torch::empty({out_features, in_features}));
  if (bias) bias_ = register_parameter("bias", torch::empty({out_features}));
  init_like_torch(weight_, bias_, in_features);
}

torch::Tensor LoRACompatibleLinearImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = at::linear(x, weight_, bias_);
  if (!adapter_) return y;
  const LoRAAdapter& a = *adapter_;
  torch::Tensor h = at::linear(at::linear(x.to(a.down.scalar_type()), a.down), a.up);
  return y + (h * (a.scale * a.multiplier)).to(y.scalar_type());
}

void LoRACompatibleLinearImpl::set_adapter(std::shared_ptr<LoRAAdapter> adapter) {
  if (adapter) check_adapter(*adapter, in_features_, out_features_, /*kernel=*/0);
  adapter_ = std::move(adapter);
}

LoRACompatibleConvImpl::LoRACompatibleConvImpl(int64_t in_channels, int64_t out_channels,
                                               int64_t kernel_size, int64_t stride, int64_t padding)
    : in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size),
      stride_(stride),
      padding_(padding) {
  weight_ = register_parameter("weight",
                               torch::empty({out_channels, in_channels, kernel_size, kernel_size}));
  bias_ = register_parameter("bias", torch::empty({out_channels}));
  init_like_torch(weight_, bias_, in_channels * kernel_size * kernel_size);
}

torch::Tensor LoRACompatibleConvImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = at::conv2d(x, weight_, bias_, stride_, padding_);
  if (!adapter_) return y;
  const LoRAAdapter& a = *adapter_;
  torch::Tensor h =
      at::conv2d(at::conv2d(x.to(a.down.scalar_type()), a.down, {}, stride_, padding_), a.up);
  return y + (h * (a.scale * a.multiplier)).to(y.scalar_type());
}

void LoRACompatibleConvImpl::set_adapter(std::shared_ptr<LoRAAdapter> adapter) {
  if (adapter) check_adapter(*adapter, in_channels_, out_channels_, kernel_size_);
  adapter_ = std::move(adapter);
}

}  // namespace lf
