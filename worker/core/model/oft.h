// OFT (orthogonal finetuning, Qiu et al. 2023 "Controlling Text-to-Image Diffusion by Orthogonal
// Finetuning"): a block-diagonal rotation of a layer's output rows, as kohya-ss/sd-scripts
// networks/oft.py OFTModule computes it (get_weight, forward, merge_to) after the changes kohya
// lists for it: the layer computes op(x, R W, bias), so W(xR) rather than (Wx)R and no R on the
// bias; the rotation and R W in float32, cast back to the input's dtype; the constraint
// alpha * out_dim (not the paper's alpha * out_dim^2).
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace lf {

// One layer's OFT parameters: oft_blocks B [k, b, b] with k b = out_dim (k = kohya's
// network_dim, the number of blocks), and the Frobenius bound of Q = B - B^T, kohya's
// `constraint` = alpha * out_dim.
struct OFTBlocks {
  at::Tensor blocks;
  double constraint = 0.0;
  bool defined() const { return blocks.defined(); }
};

// kohya OFTModule.get_weight: Q = B - B^T, rescaled by (min(||Q||_F, constraint) + 1e-8) /
// (||Q||_F + 1e-8) (so ||Q||_F <= constraint), the Cayley transform R = (I + Q)(I - Q)^-1 per
// block, then multiplier (R - I) + I. [k, b, b] float32; differentiable in oft_blocks. Q and its
// norm are taken in oft_blocks' dtype, the inverse and R in float32, as kohya does.
at::Tensor oft_rotation(const OFTBlocks& oft, double multiplier);

// kohya OFTModule.forward / merge_to: the rotated weight, block k of W's rows (rows
// [k b, (k + 1) b), flattened over in x kh x kw for a conv) replaced by R_k^T W_k, i.e.
// einsum("k n m, k n ... -> k m ...", R, W). `rotation` [k, b, b] from oft_rotation, `weight`
// [out, in] or [out, in, kh, kw] of any dtype (float8 included); float32 of weight's shape.
at::Tensor oft_rotated_weight(const at::Tensor& rotation, const at::Tensor& weight);

// "" when `oft` fits a layer with `out_dim` outputs (oft_blocks [k, b, b], k b = out_dim), else
// what does not fit.
std::string oft_shape_problem(const OFTBlocks& oft, int64_t out_dim);

}  // namespace lf
