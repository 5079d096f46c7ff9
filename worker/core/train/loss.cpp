// kohya conditional_loss with reduction "none", masked and reduced to one value per sample.
#include "train/loss.h"

#include <stdexcept>
#include <vector>

#include <torch/torch.h>

namespace lf {

torch::Tensor elementwise_loss(const torch::Tensor& pred, const torch::Tensor& target,
                               const std::string& loss_type, const torch::Tensor& huber_c) {
  if (pred.sizes() != target.sizes()) {
    throw std::invalid_argument("elementwise_loss: pred and target shapes differ");
  }
  const torch::Tensor diff = pred.to(torch::kFloat32) - target.to(torch::kFloat32);
  if (loss_type == "l2") return diff.square();
  if (loss_type == "l1") return diff.abs();
  if (loss_type != "huber" && loss_type != "smooth_l1") {
    throw std::invalid_argument("elementwise_loss: unknown loss_type \"" + loss_type +
                                "\" (valid: l2, l1, huber, smooth_l1)");
  }
  if (!huber_c.defined() || huber_c.numel() != pred.size(0)) {
    throw std::invalid_argument("elementwise_loss: " + loss_type + " needs one c per sample");
  }
  std::vector<int64_t> shape(static_cast<std::size_t>(pred.dim()), 1);
  shape[0] = pred.size(0);
  const torch::Tensor c = huber_c.to(diff.device(), torch::kFloat32).view(shape);
  const torch::Tensor root = (diff.pow(2) + c.pow(2)).sqrt() - c;
  return loss_type == "huber" ? 2.0 * c * root : 2.0 * root;
}

torch::Tensor per_sample_loss(const torch::Tensor& pred, const torch::Tensor& target,
                              const torch::Tensor& mask, const std::string& loss_type,
                              const torch::Tensor& huber_c) {
  torch::Tensor e = elementwise_loss(pred, target, loss_type, huber_c);
  if (mask.defined()) {
    if (pred.dim() != 4 || mask.dim() != 4 || mask.size(0) != pred.size(0) || mask.size(1) != 1 ||
        mask.size(2) != pred.size(2) || mask.size(3) != pred.size(3)) {
      throw std::invalid_argument(
          "per_sample_loss: expected pred and target [B, C, h, w] and mask [B, 1, h, w]");
    }
    e = e * mask.to(e.device(), torch::kFloat32);
  }
  return e.reshape({e.size(0), -1}).mean(/*dim=*/1);
}

torch::Tensor per_sample_mse(const torch::Tensor& pred, const torch::Tensor& target) {
  if (pred.dim() < 1) throw std::invalid_argument("per_sample_mse: pred must be [B, ...]");
  return per_sample_loss(pred, target, {}, "l2", {});
}

torch::Tensor per_sample_masked_mse(const torch::Tensor& pred, const torch::Tensor& target,
                                    const torch::Tensor& mask) {
  return per_sample_loss(pred, target, mask, "l2", {});
}

}  // namespace lf
