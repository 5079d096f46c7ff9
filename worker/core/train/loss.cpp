// kohya "l2" conditional_loss with reduction "none", reduced to one value per sample.
#include "train/loss.h"

#include <stdexcept>

#include <torch/torch.h>

namespace lf {

torch::Tensor per_sample_mse(const torch::Tensor& pred, const torch::Tensor& target) {
  if (pred.sizes() != target.sizes() || pred.dim() < 1) {
    throw std::invalid_argument(
        "per_sample_mse: pred and target must have the same [B, ...] "
        "shape");
  }
  torch::Tensor d = pred.to(torch::kFloat32) - target.to(torch::kFloat32);
  return d.square().reshape({d.size(0), -1}).mean(/*dim=*/1);
}

torch::Tensor per_sample_masked_mse(const torch::Tensor& pred, const torch::Tensor& target,
                                    const torch::Tensor& mask) {
  if (!mask.defined()) return per_sample_mse(pred, target);
  if (pred.sizes() != target.sizes() || pred.dim() != 4 || mask.dim() != 4 ||
      mask.size(0) != pred.size(0) || mask.size(1) != 1 || mask.size(2) != pred.size(2) ||
      mask.size(3) != pred.size(3)) {
    throw std::invalid_argument(
        "per_sample_masked_mse: expected pred and target [B, C, h, w] and mask [B, 1, h, w]");
  }
  torch::Tensor d = pred.to(torch::kFloat32) - target.to(torch::kFloat32);
  torch::Tensor e = d.square() * mask.to(d.device(), torch::kFloat32);
  return e.reshape({e.size(0), -1}).mean(/*dim=*/1);
}

}  // namespace lf
