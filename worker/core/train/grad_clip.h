// Deterministic global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_ (kohya
// --max_grad_norm).
#pragma once

#include <vector>

#include <torch/types.h>  // torch::Tensor

namespace lf {

// Global L2 norm of the grads of `params` (undefined grads skipped), computed as
// ||stack(||g_i||_2)||_2 on the grads' device in parameter order; if max_norm > 0 and the norm
// exceeds it, every grad is multiplied by min(1, max_norm / (norm + 1e-6)) (torch
// clip_grad_norm_). max_norm <= 0 only measures (kohya: max_grad_norm 0 disables clipping).
// Returns the norm before clipping (0 when no grad is defined).
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace lf
