// LyCORIS LoHa weight update (see header).
#include "model/loha.h"

#include <torch/torch.h>

namespace lf {
namespace {

// "[4, 8]", c10's ArrayRef printing.
std::string shape_text(const at::Tensor& t) {
  return t.defined() ? c10::str(t.sizes()) : "undefined";
}

}  // namespace

at::Tensor loha_delta_weight(const LoHaFactors& f, double scale,
                             const std::vector<int64_t>& weight_shape) {
  // LyCORIS HadaWeight.forward: ((w1u @ w1d) * (w2u @ w2d)) * scale, w?u = hada_w?_a.
  const at::Tensor w = at::matmul(f.w1_a, f.w1_b) * at::matmul(f.w2_a, f.w2_b);
  return (w * scale).reshape(weight_shape);
}

std::string loha_shape_problem(const LoHaFactors& f, const std::vector<int64_t>& weight_shape) {
  int64_t fan_in = 1;
  for (std::size_t i = 1; i < weight_shape.size(); ++i) fan_in *= weight_shape[i];
  const at::Tensor* all[] = {&f.w1_a, &f.w1_b, &f.w2_a, &f.w2_b};
  bool ok = !weight_shape.empty();
  for (const at::Tensor* t : all) ok = ok && t->defined() && t->dim() == 2;
  ok = ok && f.w1_a.size(0) == weight_shape[0] && f.w2_a.size(0) == weight_shape[0] &&
       f.w1_b.size(1) == fan_in && f.w2_b.size(1) == fan_in && f.w1_a.size(1) == f.w1_b.size(0) &&
       f.w2_a.size(1) == f.w2_b.size(0);
  if (ok) return "";
  std::string layer = "[";
  for (std::size_t i = 0; i < weight_shape.size(); ++i) {
    layer += (i ? ", " : "") + std::to_string(weight_shape[i]);
  }
  return "LoHa factors hada_w1_a " + shape_text(f.w1_a) + " / hada_w1_b " + shape_text(f.w1_b) +
         " / hada_w2_a " + shape_text(f.w2_a) + " / hada_w2_b " + shape_text(f.w2_b) +
         " do not fit a layer weight " + layer + "] (expected [out, r] and [r, in x k x k])";
}

}  // namespace lf
