// SGD's update, as torch.optim.SGD's _single_tensor_sgd (see header).
#include "train/optim/sgd.h"

#include <stdexcept>

#include <torch/torch.h>

namespace lf {

SGDOptimizer::SGDOptimizer(std::vector<torch::Tensor> params, const SGDOptions& options,
                           std::vector<double> lr_multipliers, std::string kohya_type)
    : SlotStateOptimizer(std::move(params), std::move(lr_multipliers), {}),
      options_(options),
      type_(std::move(kohya_type)) {
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0)) {
    throw std::invalid_argument("SGD: Nesterov momentum requires a momentum and zero dampening");
  }
}

void SGDOptimizer::update(const std::vector<double>& lrs) {
  const auto& o = options_;
  for (std::size_t i = 0; i < targets().size(); ++i) {
    torch::Tensor& p = targets()[i];
    if (!p.grad().defined()) continue;
    torch::Tensor d_p = p.grad();
    if (o.weight_decay != 0) d_p = d_p.add(p, o.weight_decay);
    if (o.momentum != 0) {
      auto& st = state_.slots[i];
      auto buf = st.find("momentum_buffer");
      if (buf == st.end()) {
        buf = st.emplace("momentum_buffer", d_p.clone().detach()).first;
      } else {
        buf->second.mul_(o.momentum).add_(d_p, 1.0 - o.dampening);
      }
      d_p = o.nesterov ? d_p.add(buf->second, o.momentum) : buf->second;
    }
    p.add_(d_p, -lrs[i]);
  }
}

}  // namespace lf
