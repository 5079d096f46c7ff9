// LyCORIS LoHa (low-rank Hadamard product, Hyeon-Woo et al. 2022 "FedPara"): the weight update
// of one layer, as lycoris-lora's LohaModule forms it (lycoris/modules/loha.py get_weight,
// functional/loha.py HadaWeight), without Tucker (hada_t1 / hada_t2) or DoRA.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace lf {

// The four LoHa factors of a layer with `out` outputs and `in` inputs per output (in x k x k for
// a conv): w1_a / w2_a [out, r], w1_b / w2_b [r, in (x k x k)], as LyCORIS stores them (2-D also
// for convs).
struct LoHaFactors {
  at::Tensor w1_a, w1_b, w2_a, w2_b;
  bool defined() const { return w1_a.defined(); }
};

// delta W = ((w1_a @ w1_b) * (w2_a @ w2_b)) * scale, reshaped to `weight_shape` ([out, in] or
// [out, in, k, k]), in the factors' dtype; scale is LyCORIS's alpha / rank (times the network
// multiplier here). Differentiable in the factors.
at::Tensor loha_delta_weight(const LoHaFactors& f, double scale,
                             const std::vector<int64_t>& weight_shape);

// "" when the factors fit a layer whose weight has `weight_shape`, else what does not fit
// (shapes of all four and the layer's).
std::string loha_shape_problem(const LoHaFactors& f, const std::vector<int64_t>& weight_shape);

}  // namespace lf
