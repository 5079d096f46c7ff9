// Per-sample diffusion loss: kohya's element-wise loss in float32 (l2, l1, huber, smooth_l1),
// masked, averaged over every non-batch dimension. Mirrors kohya train_network.py
// process_batch: train_util.conditional_loss with reduction "none", apply_masked_loss, then the
// mean over [1, 2, 3].
#pragma once

#include <string>

#include <torch/types.h>  // torch::Tensor

namespace lf {

// kohya conditional_loss with reduction "none": pred, target [B, ...] -> the element-wise loss
// in float32, [B, ...]: (pred - target)^2, |pred - target|, huber
// 2 c (sqrt((pred - target)^2 + c^2) - c) or smooth_l1 2 (sqrt((pred - target)^2 + c^2) - c),
// c = huber_c [B] broadcast per sample. Throws std::invalid_argument for an unknown type or a
// missing c.
torch::Tensor elementwise_loss(const torch::Tensor& pred, const torch::Tensor& target,
                               const std::string& loss_type, const torch::Tensor& huber_c);

// elementwise_loss, multiplied by `mask` [B, 1, h, w] (in [0, 1], broadcast over channels;
// undefined: none) as kohya apply_masked_loss, then averaged per sample over every element,
// masked ones included: [B] float32. Throws std::invalid_argument when the mask's batch or
// spatial size differs from pred's [B, C, h, w].
torch::Tensor per_sample_loss(const torch::Tensor& pred, const torch::Tensor& target,
                              const torch::Tensor& mask, const std::string& loss_type,
                              const torch::Tensor& huber_c);

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
