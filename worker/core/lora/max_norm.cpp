// kohya's max-norm regularization of the LoRA modules (see header).
#include "lora/max_norm.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

namespace lf {
namespace {

// delta W of one module before its scale: kohya's three cases.
torch::Tensor delta_weight(const torch::Tensor& down, const torch::Tensor& up) {
  const bool one_by_one = down.dim() == 4 && up.dim() == 4 && down.size(2) == 1 &&
                          down.size(3) == 1 && up.size(2) == 1 && up.size(3) == 1;
  if (one_by_one) return up.flatten(1).matmul(down.flatten(1)).unsqueeze(2).unsqueeze(3);
  if (down.dim() == 4) {  // k x k LoCon: the conv of up over the transposed down
    return torch::conv2d(down.permute({1, 0, 2, 3}), up).permute({1, 0, 2, 3});
  }
  return up.matmul(down);
}

}  // namespace

MaxNormReport apply_max_norm_regularization(LoRANetwork& network, double max_norm) {
  if (!(max_norm > 0)) {
    throw std::invalid_argument("apply_max_norm_regularization: max_norm must be > 0");
  }
  torch::NoGradGuard no_grad;
  auto state = network.state_dict();  // shares the adapters' storage
  MaxNormReport report;
  int modules = 0;
  for (const std::string& name : network.module_names()) {
    torch::Tensor& down = state.at(name + ".lora_down.weight");
    torch::Tensor& up = state.at(name + ".lora_up.weight");
    const double alpha = state.at(name + ".alpha").item<double>();
    const torch::Tensor updown = delta_weight(down.to(torch::kFloat32), up.to(torch::kFloat32)) *
                                 (alpha / static_cast<double>(down.size(0)));
    // kohya, in float32: norm clamped below at max / 2, desired = min(norm, max),
    // ratio = desired / norm, both factors scaled by sqrt(ratio) when it is not 1.
    const torch::Tensor norm = updown.norm().clamp_min(max_norm / 2);
    const torch::Tensor ratio = (norm.clamp_max(max_norm) / norm).cpu();
    if (ratio.item<float>() != 1.0f) {
      report.keys_scaled += 1;
      const torch::Tensor factor = ratio.sqrt().to(down.device());
      down.mul_(factor);
      up.mul_(factor);
    }
    const double scaled = (updown.norm().cpu() * ratio).item<double>();
    report.mean_norm += scaled;
    report.max_norm = std::max(report.max_norm, scaled);
    ++modules;
  }
  if (modules > 0) report.mean_norm /= modules;
  return report;
}

}  // namespace lf
