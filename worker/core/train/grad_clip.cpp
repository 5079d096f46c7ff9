// clip_grad_norm_ (see header).
#include "train/grad_clip.h"

#include <torch/torch.h>

namespace lf {

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  std::vector<torch::Tensor> norms;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    // Half gradients are measured in float32 (a bf16 sum of squares loses most digits).
    const torch::Tensor& g = p.grad();
    norms.push_back(
        torch::linalg_vector_norm(g.scalar_type() == at::kFloat ? g : g.to(at::kFloat), 2));
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
