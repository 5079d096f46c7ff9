// Per-sample diffusion loss: element-wise squared error in float32 averaged over every
// non-batch dimension. Mirrors kohya train_network.py process_batch (loss_type "l2",
// reduction "none", then mean over [1, 2, 3]).
#pragma once

#include <torch/types.h>  // torch::Tensor

namespace lf {

// pred, target [B, ...] (same shape, any float dtype) -> [B] float32 mean((pred - target)^2).
// Throws std::invalid_argument on a shape mismatch.
torch::Tensor per_sample_mse(const torch::Tensor& pred, const torch::Tensor& target);

// As per_sample_mse, with the squared error multiplied by `mask` [B, 1, h, w] (values in [0, 1],
// broadcast over channels) before the mean, as kohya apply_masked_loss (alpha_mask): the mean
// still divides by every element, masked ones included. An undefined mask means no mask.
// Throws std::invalid_argument when the mask's batch or spatial size differs from pred's.
torch::Tensor per_sample_masked_mse(const torch::Tensor& pred, const torch::Tensor& target,
                                    const torch::Tensor& mask);

}  // namespace lf
