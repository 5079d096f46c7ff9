// AdamW over the LoRA parameters with an externally scheduled LR, an exact (bitwise) state
// save/restore for resume, and deterministic global-norm gradient clipping. Wraps
// torch::optim::AdamW (torch.optim.AdamW semantics, amsgrad off) and mirrors
// torch.nn.utils.clip_grad_norm_.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>  // torch::Tensor

namespace torch::optim {
class AdamW;
}

namespace lf {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled; torch.optim.AdamW's default (kohya's default too)
};

class LoRAOptimizer {
 public:
  // `params` are the trainable tensors (e.g. LoRANetwork::parameters()). lr_multipliers (one per
  // parameter, empty = all 1) scale step()'s lr per parameter, as kohya's separate unet_lr and
  // text_encoder_lr groups (multiplier = group lr / learning_rate) follow one schedule.
  // Throws std::invalid_argument if params is empty, a tensor does not require grad, or the
  // multiplier count differs from the parameter count.
  LoRAOptimizer(std::vector<torch::Tensor> params, const AdamWOptions& options,
                std::vector<double> lr_multipliers = {});
  ~LoRAOptimizer();
  LoRAOptimizer(const LoRAOptimizer&) = delete;
  LoRAOptimizer& operator=(const LoRAOptimizer&) = delete;

  // Sets lr x multiplier on every group, then one AdamW step (params without grad are skipped).
  // Half-precision params (kohya full_fp16 / full_bf16) are stepped through float32 copies with
  // float32 moments, and the result is rounded into them once per step: torch's AdamW on fp16
  // weights loses its eps (1e-8 underflows) and turns a zero gradient into 0/0 = NaN.
  void step(double lr);
  // Resets every parameter's grad to undefined (set_to_none, like torch's default); grads may
  // be views (e.g. of a flat all-reduce buffer).
  void zero_grad();
  // Optimizer steps taken so far (AdamW's per-parameter step count; 0 before the first step).
  int64_t step_count() const;

  // Per parameter (param_names[i] names params[i]): "<name>.exp_avg", "<name>.exp_avg_sq"
  // (clones, float32 for half params, else the params' dtype; the params' device) and one
  // "step" entry (0-dim int64). Before the first
  // step the moments are zeros. Throws std::invalid_argument if param_names.size() differs
  // from the parameter count, std::logic_error if parameters disagree on the step count.
  std::map<std::string, torch::Tensor> state_dict(
      const std::vector<std::string>& param_names) const;

  // Restores a state_dict() exactly (values copied bit for bit, moved to each parameter's
  // device), so that the following steps equal an uninterrupted run. Throws
  // std::runtime_error naming missing keys or mismatched shapes.
  void load_state_dict(const std::map<std::string, torch::Tensor>& state,
                       const std::vector<std::string>& param_names);

  const std::vector<torch::Tensor>& params() const { return params_; }

 private:
  std::vector<torch::Tensor> params_;
  // What AdamW steps: params_ themselves, or float32 copies of half params_ (half_).
  std::vector<torch::Tensor> targets_;
  bool half_ = false;
  std::unique_ptr<torch::optim::AdamW> adamw_;
  std::vector<double> group_multipliers_;  // per torch param group
};

// Global L2 norm of the grads of `params` (undefined grads skipped), computed as
// ||stack(||g_i||_2)||_2 on the grads' device in parameter order; if max_norm > 0 and the norm
// exceeds it, every grad is multiplied by min(1, max_norm / (norm + 1e-6)) (torch
// clip_grad_norm_). max_norm <= 0 only measures (kohya: max_grad_norm 0 disables clipping).
// Returns the norm before clipping (0 when no grad is defined).
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace lf
