// The shared plumbing of every LoRA optimizer (see header).
#include "train/optimizer.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

const std::string kMarkerPrefix = "optimizer.";

}  // namespace

std::string LoRAOptimizer::saved_type(const std::map<std::string, torch::Tensor>& state) {
  auto it = state.lower_bound(kMarkerPrefix);
  if (it != state.end() && it->first.compare(0, kMarkerPrefix.size(), kMarkerPrefix) == 0) {
    return it->first.substr(kMarkerPrefix.size());
  }
  return "AdamW";
}

LoRAOptimizer::LoRAOptimizer(std::vector<torch::Tensor> params, std::vector<double> lr_multipliers)
    : params_(std::move(params)), multipliers_(std::move(lr_multipliers)) {
  if (params_.empty()) throw std::invalid_argument("LoRAOptimizer: no parameters");
  for (const auto& p : params_) {
    if (!p.requires_grad()) {
      throw std::invalid_argument("LoRAOptimizer: every parameter must require grad");
    }
  }
  if (multipliers_.empty()) multipliers_.assign(params_.size(), 1.0);
  if (multipliers_.size() != params_.size()) {
    throw std::invalid_argument("LoRAOptimizer: " + std::to_string(multipliers_.size()) +
                                " lr multipliers for " + std::to_string(params_.size()) +
                                " parameters");
  }
  // Half parameters (full_fp16 / full_bf16) are stepped as float32 copies with float32 state:
  // in fp16 AdamW's eps (1e-8) would round to 0, and a zero gradient (lora_down's first step,
  // lora_up being zero) would divide 0 by 0.
  half_ = params_[0].scalar_type() == at::kHalf || params_[0].scalar_type() == at::kBFloat16;
  for (const auto& p : params_) {
    targets_.push_back(half_ ? p.detach().to(at::kFloat).requires_grad_(true) : p);
  }
}

LoRAOptimizer::~LoRAOptimizer() = default;

void LoRAOptimizer::pull_targets() {
  if (!half_) return;
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) targets_[i].copy_(params_[i]);
}

void LoRAOptimizer::push_targets() {
  if (!half_) return;
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) params_[i].copy_(targets_[i]);
}

void LoRAOptimizer::step(double lr) {
  torch::NoGradGuard no_grad;
  pull_targets();
  if (half_) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].grad().defined()) {
        targets_[i].mutable_grad() = params_[i].grad().to(at::kFloat);
      } else {
        targets_[i].mutable_grad().reset();
      }
    }
  }
  std::vector<double> lrs(params_.size());
  for (std::size_t i = 0; i < lrs.size(); ++i) lrs[i] = lr * multipliers_[i];
  ++steps_;
  update(lrs);
  push_targets();
}

void LoRAOptimizer::zero_grad() {
  // Not Optimizer::zero_grad(): it detach_()es first, which throws for grads that are views
  // (e.g. of a flat all-reduce bucket).
  for (auto& p : params_) p.mutable_grad().reset();
  if (half_) {
    for (auto& t : targets_) t.mutable_grad().reset();
  }
}

std::map<std::string, torch::Tensor> LoRAOptimizer::state_dict(
    const std::vector<std::string>& param_names) const {
  if (param_names.size() != params_.size()) {
    throw std::invalid_argument("LoRAOptimizer::state_dict: " + std::to_string(param_names.size()) +
                                " names for " + std::to_string(params_.size()) + " parameters");
  }
  std::map<std::string, torch::Tensor> out;
  save_state(param_names, out);
  out["step"] = torch::scalar_tensor(steps_, torch::dtype(torch::kInt64));
  out[kMarkerPrefix + type()] = torch::zeros({}, torch::kUInt8);
  return out;
}

void LoRAOptimizer::load_state_dict(const std::map<std::string, torch::Tensor>& state,
                                    const std::vector<std::string>& param_names) {
  if (param_names.size() != params_.size()) {
    throw std::invalid_argument(
        "LoRAOptimizer::load_state_dict: " + std::to_string(param_names.size()) + " names for " +
        std::to_string(params_.size()) + " parameters");
  }
  const std::string saved = saved_type(state);
  if (saved != type()) {
    throw std::runtime_error(
        "cannot load optimizer state: the checkpoint was trained with "
        "optimizer_type " +
        saved + ", this run uses " + type() +
        " (an optimizer's state does not carry over to another)");
  }
  auto step = state.find("step");
  if (step == state.end())
    throw std::runtime_error("cannot load optimizer state:\n  missing key step");
  load_state(state, param_names);
  steps_ = step->second.to(torch::kInt64).item<int64_t>();
}

void OptimizerSlots::save(const std::vector<std::string>& param_names,
                          std::map<std::string, torch::Tensor>& out) const {
  for (std::size_t i = 0; i < slots.size(); ++i) {
    for (const auto& [slot, t] : slots[i]) out[param_names[i] + "." + slot] = t.detach().clone();
  }
  for (const auto& [name, value] : scalars) {
    out[name] = torch::scalar_tensor(value, torch::dtype(torch::kFloat64));
  }
}

void OptimizerSlots::load(const std::map<std::string, torch::Tensor>& state,
                          const std::vector<std::string>& param_names,
                          const std::vector<torch::Tensor>& like,
                          const std::vector<std::string>& required) {
  std::string problems;
  for (auto& [name, value] : scalars) {
    auto it = state.find(name);
    if (it == state.end()) {
      problems += "\n  missing key " + name;
    } else {
      value = it->second.to(torch::kFloat64).item<double>();
    }
  }
  slots.assign(param_names.size(), {});
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < param_names.size(); ++i) {
    const std::string prefix = param_names[i] + ".";
    for (auto it = state.lower_bound(prefix);
         it != state.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      const std::string slot = it->first.substr(prefix.size());
      // 0-dim float64 / int64 slots are host-side counters (step, lr_max, weight_sum).
      const bool host_scalar = it->second.dim() == 0 && (it->second.scalar_type() == at::kDouble ||
                                                         it->second.scalar_type() == at::kLong);
      slots[i][slot] = it->second.to(host_scalar ? at::Device(at::kCPU) : like[i].device()).clone();
      const bool param_shaped =
          slot == "exp_avg" || slot == "exp_avg_sq" || slot == "z" || slot == "momentum_buffer";
      if (param_shaped && it->second.sizes() != like[i].sizes()) {
        problems += "\n  shape mismatch for " + it->first;
      }
    }
    for (const std::string& slot : required) {
      if (!slots[i].empty() && !slots[i].count(slot)) {
        problems += "\n  missing key " + prefix + slot;
      }
    }
  }
  if (!problems.empty()) throw std::runtime_error("cannot load optimizer state:" + problems);
}

SlotStateOptimizer::SlotStateOptimizer(std::vector<torch::Tensor> params,
                                       std::vector<double> lr_multipliers,
                                       std::vector<std::string> required_slots)
    : LoRAOptimizer(std::move(params), std::move(lr_multipliers)),
      required_slots_(std::move(required_slots)) {
  state_.slots.resize(targets().size());
}

void SlotStateOptimizer::save_state(const std::vector<std::string>& param_names,
                                    std::map<std::string, torch::Tensor>& out) const {
  state_.save(param_names, out);
}

void SlotStateOptimizer::load_state(const std::map<std::string, torch::Tensor>& state,
                                    const std::vector<std::string>& param_names) {
  state_.load(state, param_names, targets(), required_slots_);
}

void require_one_lr_or_zero(const std::string& type, const std::vector<double>& lr_multipliers) {
  const double top = *std::max_element(lr_multipliers.begin(), lr_multipliers.end());
  for (double m : lr_multipliers) {
    if (m != top && m != 0.0) {
      throw std::invalid_argument(type +
                                  ": every parameter group needs the same lr, or 0 (its "
                                  "reference supports different lrs only for values of 0)");
    }
  }
}

}  // namespace lf
