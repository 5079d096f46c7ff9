// OFT's block rotation and rotated weight (see header), mirroring kohya networks/oft.py.
#include "model/oft.h"

#include <torch/torch.h>

namespace lf {

at::Tensor oft_rotation(const OFTBlocks& oft, double multiplier) {
  const at::Tensor& b = oft.blocks;
  at::Tensor q = b - b.transpose(1, 2);
  const at::Tensor norm = q.flatten().norm();
  const at::Tensor bounded = norm.clamp_max(oft.constraint);
  q = q * ((bounded + 1e-8) / (norm + 1e-8));
  // kohya keeps a float32 identity ([k, b, b], torch.eye(b).repeat); broadcasting is the same.
  const at::Tensor eye = torch::eye(b.size(1), b.options().dtype(torch::kFloat32)).unsqueeze(0);
  const at::Tensor r = at::matmul(eye + q, (eye - q).to(torch::kFloat32).inverse());
  return multiplier * (r - eye) + eye;
}

at::Tensor oft_rotated_weight(const at::Tensor& rotation, const at::Tensor& weight) {
  const int64_t k = rotation.size(0), b = rotation.size(1);
  const at::Tensor w = weight.to(torch::kFloat32).reshape({k, b, -1});
  return at::matmul(rotation.to(torch::kFloat32).transpose(1, 2), w).reshape(weight.sizes());
}

std::string oft_shape_problem(const OFTBlocks& oft, int64_t out_dim) {
  const at::Tensor& b = oft.blocks;
  if (b.dim() == 3 && b.size(1) == b.size(2) && b.size(0) * b.size(1) == out_dim) return "";
  std::string shape = "[";
  for (int64_t i = 0; i < b.dim(); ++i) shape += (i ? ", " : "") + std::to_string(b.size(i));
  return "OFT oft_blocks " + shape + "] do not fit a layer with out=" + std::to_string(out_dim) +
         " (expected [k, out / k, out / k])";
}

}  // namespace lf
