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

}  // namespace lf
