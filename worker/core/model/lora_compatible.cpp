// LoRA-injectable Linear / Conv: base projection plus multiplier * scale * up(down(x)),
// the forward of kohya networks.lora.LoRAModule (its dropouts in lora_dropout.h).
#include "model/lora_compatible.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/autocast_mode.h>
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
  if (a.dora_scale.defined() && a.dora_scale.numel() != out) {
    throw std::invalid_argument("DoRA dora_scale " + shape_of(a.dora_scale) +
                                " does not fit a layer with out=" + std::to_string(out));
  }
  if (a.oft.defined()) {
    const std::string problem = oft_shape_problem(a.oft, out);
    if (!problem.empty()) throw std::invalid_argument(problem);
    return;
  }
  if (a.loha.defined() || a.lokr.defined()) {
    const std::vector<int64_t> shape =
        conv ? std::vector<int64_t>{out, in, kernel, kernel} : std::vector<int64_t>{out, in};
    const std::string problem =
        a.loha.defined() ? loha_shape_problem(a.loha, shape) : lokr_shape_problem(a.lokr, shape);
    if (!problem.empty()) throw std::invalid_argument(problem);
    return;
  }
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

// The dtype a layer computes in: autocast's when it is on for the input's device, else the
// input's own.
at::ScalarType compute_dtype_of(const torch::Tensor& x) {
  const c10::DeviceType type = x.device().type();
  return at::autocast::is_autocast_enabled(type) ? at::autocast::get_autocast_dtype(type)
                                                 : x.scalar_type();
}

// fp8_base: a float8 weight is upcast to the compute dtype for this one call (kohya relies on
// autocast for the same; the upcast copy is freed when the layer returns).
torch::Tensor usable_weight(const torch::Tensor& weight, const torch::Tensor& x) {
  return is_float8(weight.scalar_type()) ? weight.to(compute_dtype_of(x)) : weight;
}

// The LoRA path's input: in the adapter's dtype, unless autocast casts both anyway.
torch::Tensor lora_input(const torch::Tensor& x, const LoRAAdapter& a) {
  return at::autocast::is_autocast_enabled(x.device().type()) ? x : x.to(a.down.scalar_type());
}

// delta W of the adapter's factors at `scale`, shaped as `weight`.
torch::Tensor factor_delta_weight(const LoRAAdapter& a, const torch::Tensor& weight, double scale) {
  const std::vector<int64_t> shape = weight.sizes().vec();
  if (a.loha.defined()) return loha_delta_weight(a.loha, scale, shape);
  if (a.lokr.defined()) return lokr_delta_weight(a.lokr, scale, shape);
  // LyCORIS LoConModule.make_weight: up [out, r] @ down [r, in k k].
  return (at::matmul(a.up.flatten(1), a.down.flatten(1)) * scale).reshape(shape);
}

// LyCORIS LohaModule / LokrModule / LoConModule.forward (rebuild mode): the update of the weight,
// multiplier * delta W, or with DoRA weight_decompose(W + delta W, dora_scale, multiplier) - W;
// in the factors' dtype.
torch::Tensor delta_weight_of(const LoRAAdapter& a, const torch::Tensor& weight) {
  if (!a.dora_scale.defined()) return factor_delta_weight(a, weight, a.scale * a.multiplier);
  const torch::Tensor w = weight.to(a.dora_scale.scalar_type());
  const torch::Tensor merged = w + factor_delta_weight(a, weight, a.scale);
  const double eps = std::numeric_limits<float>::epsilon();  // torch.finfo(float32).eps
  std::vector<int64_t> norm_shape(static_cast<std::size_t>(w.dim()), 1);
  norm_shape[0] = w.size(0);
  const torch::Tensor norm = merged.reshape({w.size(0), -1}).norm(2, {1}).reshape(norm_shape) + eps;
  torch::Tensor factor = a.dora_scale.reshape(norm_shape) / norm;
  if (a.multiplier != 1.0) factor = a.multiplier * (factor - 1) + 1;
  return merged * factor - w;
}

torch::Tensor delta_input(const torch::Tensor& x, const LoRAAdapter& a) {
  const at::Tensor& factor = a.loha.defined()        ? a.loha.w1_a
                             : a.lokr.w1.defined()   ? a.lokr.w1
                             : a.lokr.w1_a.defined() ? a.lokr.w1_a
                                                     : a.down;
  return at::autocast::is_autocast_enabled(x.device().type()) ? x : x.to(factor.scalar_type());
}

// kohya OFTModule.forward: the layer's weight rotated by the adapter's OFT blocks, in x's dtype.
torch::Tensor oft_weight_for(const LoRAAdapter& a, const torch::Tensor& weight,
                             const torch::Tensor& x) {
  return oft_rotated_weight(oft_rotation(a.oft, a.multiplier), weight).to(x.scalar_type());
}

// True when the adapter replaces the layer's weight by R W for this call (kohya: multiplier 0
// runs the original forward).
bool oft_active(const std::shared_ptr<LoRAAdapter>& a) {
  return a && a->oft.defined() && a->multiplier != 0.0 && !skip_lora_module(a->dropout);
}

}  // namespace

bool is_float8(at::ScalarType dtype) {
  return dtype == at::kFloat8_e4m3fn || dtype == at::kFloat8_e5m2 ||
         dtype == at::kFloat8_e4m3fnuz || dtype == at::kFloat8_e5m2fnuz;
}

std::size_t set_matrix_dtype(torch::nn::Module& module, at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  std::size_t n = 0;
  for (const auto& m : module.modules(/*include_self=*/true)) {
    torch::Tensor* weight = nullptr;
    if (auto* linear = m->as<LoRACompatibleLinearImpl>()) weight = &linear->weight_mutable();
    if (auto* conv = m->as<LoRACompatibleConvImpl>()) weight = &conv->weight_mutable();
    if (weight == nullptr) continue;
    weight->set_data(weight->to(dtype));
    ++n;
  }
  return n;
}

LoRACompatibleLinearImpl::LoRACompatibleLinearImpl(int64_t in_features, int64_t out_features,
                                                   bool bias)
    : in_features_(in_features), out_features_(out_features) {
  weight_ = register_parameter("weight", torch::empty({out_features, in_features}));
  if (bias) bias_ = register_parameter("bias", torch::empty({out_features}));
  init_like_torch(weight_, bias_, in_features);
}

torch::Tensor LoRACompatibleLinearImpl::forward(const torch::Tensor& x) {
  if (oft_active(adapter_)) return at::linear(x, oft_weight_for(*adapter_, weight_, x), bias_);
  torch::Tensor y = at::linear(x, usable_weight(weight_, x), bias_);
  if (!adapter_ || adapter_->oft.defined() || skip_lora_module(adapter_->dropout)) return y;
  const LoRAAdapter& a = *adapter_;
  if (a.rebuilds_weight()) {
    const torch::Tensor h = at::linear(delta_input(x, a), delta_weight_of(a, weight_));
    return y + h.to(y.scalar_type());
  }
  double scale = a.scale;
  torch::Tensor h = at::linear(lora_input(x, a), a.down);
  h = at::linear(apply_lora_dropout(a.dropout, h, /*conv=*/false, &scale), a.up);
  return y + (h * (scale * a.multiplier)).to(y.scalar_type());
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
  if (oft_active(adapter_)) {
    return at::conv2d(x, oft_weight_for(*adapter_, weight_, x), bias_, stride_, padding_);
  }
  torch::Tensor y = at::conv2d(x, usable_weight(weight_, x), bias_, stride_, padding_);
  if (!adapter_ || adapter_->oft.defined() || skip_lora_module(adapter_->dropout)) return y;
  const LoRAAdapter& a = *adapter_;
  if (a.rebuilds_weight()) {
    const torch::Tensor h =
        at::conv2d(delta_input(x, a), delta_weight_of(a, weight_), {}, stride_, padding_);
    return y + h.to(y.scalar_type());
  }
  double scale = a.scale;
  torch::Tensor h = at::conv2d(lora_input(x, a), a.down, {}, stride_, padding_);
  h = at::conv2d(apply_lora_dropout(a.dropout, h, /*conv=*/true, &scale), a.up);
  return y + (h * (scale * a.multiplier)).to(y.scalar_type());
}

void LoRACompatibleConvImpl::set_adapter(std::shared_ptr<LoRAAdapter> adapter) {
  if (adapter) check_adapter(*adapter, in_channels_, out_channels_, kernel_size_);
  adapter_ = std::move(adapter);
}

}  // namespace lf
