// torch::optim::AdamW wrapper with exact state round-trip, and clip_grad_norm_.
#include "train/optimizer.h"

#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

torch::optim::AdamWParamState& state_of(torch::optim::AdamW& opt, const torch::Tensor& p) {
  auto& states = opt.state();
  auto it = states.find(p.unsafeGetTensorImpl());
  if (it == states.end()) {
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    it = states.emplace(p.unsafeGetTensorImpl(), std::move(fresh)).first;
  }
  return static_cast<torch::optim::AdamWParamState&>(*it->second);
}

}  // namespace

LoRAOptimizer::LoRAOptimizer(std::vector<torch::Tensor> params, const AdamWOptions& options,
                             std::vector<double> lr_multipliers)
    : params_(std::move(params)) {
  if (params_.empty()) throw std::invalid_argument("LoRAOptimizer: no parameters");
  for (const auto& p : params_) {
    if (!p.requires_grad()) {
      throw std::invalid_argument("LoRAOptimizer: every parameter must require grad");
    }
  }
  // Half parameters (full_fp16 / full_bf16): AdamW runs on float32 copies, whose moments are
  // float32 too, and each step's result is rounded into the parameter. In fp16 AdamW's eps
  // (1e-8) would round to 0, and a zero gradient (lora_down's first step, lora_up being zero)
  // would divide 0 by 0.
  half_ = params_[0].scalar_type() == at::kHalf || params_[0].scalar_type() == at::kBFloat16;
  for (const auto& p : params_) {
    targets_.push_back(half_ ? p.detach().to(at::kFloat).requires_grad_(true) : p);
  }
  if (lr_multipliers.empty()) lr_multipliers.assign(params_.size(), 1.0);
  if (lr_multipliers.size() != params_.size()) {
    throw std::invalid_argument("LoRAOptimizer: " + std::to_string(lr_multipliers.size()) +
                                " lr multipliers for " + std::to_string(params_.size()) +
                                " parameters");
  }
  const auto defaults = torch::optim::AdamWOptions(1e-3)
                            .betas(std::make_tuple(options.beta1, options.beta2))
                            .eps(options.eps)
                            .weight_decay(options.weight_decay)
                            .amsgrad(false);
  // One torch param group per run of equal multipliers (kohya: a unet_lr group and a
  // text_encoder_lr group), so the per-group lr is all step() has to set.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (std::size_t i = 0; i < targets_.size();) {
    std::size_t j = i;
    while (j < targets_.size() && lr_multipliers[j] == lr_multipliers[i]) ++j;
    groups.emplace_back(std::vector<torch::Tensor>(targets_.begin() + static_cast<long>(i),
                                                   targets_.begin() + static_cast<long>(j)),
                        std::make_unique<torch::optim::AdamWOptions>(defaults));
    group_multipliers_.push_back(lr_multipliers[i]);
    i = j;
  }
  adamw_ = std::make_unique<torch::optim::AdamW>(std::move(groups), defaults);
}

LoRAOptimizer::~LoRAOptimizer() = default;

void LoRAOptimizer::step(double lr) {
  auto& groups = adamw_->param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    static_cast<torch::optim::AdamWOptions&>(groups[g].options()).lr(lr * group_multipliers_[g]);
  }
  torch::NoGradGuard no_grad;
  if (half_) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      targets_[i].copy_(params_[i]);
      if (params_[i].grad().defined()) {
        targets_[i].mutable_grad() = params_[i].grad().to(at::kFloat);
      } else {
        targets_[i].mutable_grad().reset();
      }
    }
  }
  adamw_->step();
  if (half_) {
    for (std::size_t i = 0; i < params_.size(); ++i) params_[i].copy_(targets_[i]);
  }
}

void LoRAOptimizer::zero_grad() {
  // Not Optimizer::zero_grad(): it detach_()es first, which throws for grads that are views
  // (e.g. of a flat all-reduce bucket).
  for (auto& p : params_) p.mutable_grad().reset();
  if (half_) {
    for (auto& t : targets_) t.mutable_grad().reset();
  }
}

int64_t LoRAOptimizer::step_count() const {
  const auto& states = adamw_->state();
  int64_t step = 0;
  for (const auto& p : targets_) {
    auto it = states.find(p.unsafeGetTensorImpl());
    if (it != states.end()) {
      step = std::max(step, static_cast<const torch::optim::AdamWParamState&>(*it->second).step());
    }
  }
  return step;
}

std::map<std::string, torch::Tensor> LoRAOptimizer::state_dict(
    const std::vector<std::string>& param_names) const {
  if (param_names.size() != params_.size()) {
    throw std::invalid_argument("LoRAOptimizer::state_dict: " + std::to_string(param_names.size()) +
                                " names for " + std::to_string(params_.size()) + " parameters");
  }
  std::map<std::string, torch::Tensor> out;
  const auto& states = adamw_->state();
  int64_t step = -1;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const torch::Tensor& p = targets_[i];
    auto it = states.find(p.unsafeGetTensorImpl());
    int64_t s = 0;
    if (it == states.end()) {
      out[param_names[i] + ".exp_avg"] = torch::zeros_like(p).detach();
      out[param_names[i] + ".exp_avg_sq"] = torch::zeros_like(p).detach();
    } else {
      const auto& st = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      out[param_names[i] + ".exp_avg"] = st.exp_avg().detach().clone();
      out[param_names[i] + ".exp_avg_sq"] = st.exp_avg_sq().detach().clone();
      s = st.step();
    }
    if (step >= 0 && s != step) {
      throw std::logic_error(
          "LoRAOptimizer::state_dict: parameters disagree on the step count "
          "(" +
          std::to_string(step) + " vs " + std::to_string(s) + ")");
    }
    step = s;
  }
  out["step"] = torch::scalar_tensor(step, torch::dtype(torch::kInt64));
  return out;
}

void LoRAOptimizer::load_state_dict(const std::map<std::string, torch::Tensor>& state,
                                    const std::vector<std::string>& param_names) {
  if (param_names.size() != params_.size()) {
    throw std::invalid_argument(
        "LoRAOptimizer::load_state_dict: " + std::to_string(param_names.size()) + " names for " +
        std::to_string(params_.size()) + " parameters");
  }
  std::string problems;
  auto check = [&](const std::string& key, const torch::Tensor* like) {
    auto it = state.find(key);
    if (it == state.end()) {
      problems += "\n  missing key " + key;
    } else if (like && it->second.sizes() != like->sizes()) {
      problems += "\n  shape mismatch for " + key;
    }
  };
  check("step", nullptr);
  for (size_t i = 0; i < params_.size(); ++i) {
    check(param_names[i] + ".exp_avg", &params_[i]);
    check(param_names[i] + ".exp_avg_sq", &params_[i]);
  }
  if (!problems.empty()) throw std::runtime_error("cannot load optimizer state:" + problems);

  const int64_t step = state.at("step").to(torch::kInt64).item<int64_t>();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const torch::Tensor& p = targets_[i];
    auto& st = state_of(*adamw_, p);
    st.step(step);
    st.exp_avg(state.at(param_names[i] + ".exp_avg").to(p.options()).clone());
    st.exp_avg_sq(state.at(param_names[i] + ".exp_avg_sq").to(p.options()).clone());
  }
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  std::vector<torch::Tensor> norms;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    // Half gradients are measured in float32 (a bf16 sum of squares loses most digits).
    const torch::Tensor& g = p.grad();
    norms.push_back(torch::linalg_vector_norm(g.scalar_type() == at::kFloat ? g : g.to(at::kFloat), 2));
  }
  if (grads.empty()) return 0.0;
  torch::Tensor total = torch::linalg_vector_norm(torch::stack(norms), 2);
  if (max_norm > 0) {
    torch::Tensor coef = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
    for (auto& g : grads) g.mul_(coef.to(g.scalar_type()));
  }
  return total.item<double>();
}

}  // namespace lf
