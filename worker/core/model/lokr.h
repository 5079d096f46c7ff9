// LyCORIS LoKr (low-rank Kronecker product, Yeh et al. 2023 "Navigating Text-To-Image
// Customization: From LyCORIS Fine-Tuning to Model Evaluation"): the factor layout, init and
// weight update of one layer, as lycoris-lora's LokrModule (lycoris/modules/lokr.py
// __init__ / get_weight, functional/lokr.py make_kron, functional/general.py factorization),
// without Tucker (lokr_t2), use_scalar, unbalanced_factorization or DoRA.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace lf {

// delta W = kron(W1, W2) with W1 = lokr_w1 or lokr_w1_a @ lokr_w1_b ([a, c]) and W2 = lokr_w2
// ([b, d] Linear, [b, d, k, k] conv) or lokr_w2_a @ lokr_w2_b ([b, r] @ [r, d (x k x k)]);
// out = a b, in = c d. Exactly one of w1 / (w1_a, w1_b) and of w2 / (w2_a, w2_b) is set.
struct LoKrFactors {
  at::Tensor w1, w1_a, w1_b, w2, w2_a, w2_b;
  bool defined() const { return w1.defined() || w1_a.defined(); }
  // LyCORIS: with both halves full matrices (no rank anywhere) the scale is 1 (alpha = rank).
  bool full() const { return w1.defined() && w2.defined(); }
};

// LyCORIS factorization(dimension, factor): {m, n}, m <= n, m n = dimension: with factor > 0
// dividing it, {factor, dimension / factor} (ordered); otherwise the divisor pair closest to
// balanced with m <= factor (factor -1: no bound), e.g. 128 -> {8, 16}, 360 -> {8, 45}.
std::pair<int64_t, int64_t> lokr_factorization(int64_t dimension, int64_t factor);

// LokrModule.__init__'s factors for a layer weight of `weight_shape` ([out, in] or
// [out, in, k, k]) with lora_dim `rank`, `factor` and `decompose_both`: w1 [a, c] (or w1_a [a, r],
// w1_b [r, c] when decompose_both and r < max(a, c) / 2), w2 [b, d (, k, k)] when
// r >= max(b, d) / 2, else w2_a [b, r], w2_b [r, d (x k x k)], with (c, d) =
// factorization(in, factor) and (a, b) = factorization(out, factor). Drawn in LyCORIS's order on
// `generator`, float32 CPU: w2_a kaiming_uniform(a = sqrt(5)), i.e. U(+-1/sqrt(fan_in)), then w1
// (or w1_a, w1_b) likewise; w2 / w2_b are zero, so delta W starts at 0.
LoKrFactors init_lokr(const std::vector<int64_t>& weight_shape, int64_t rank, int64_t factor,
                      bool decompose_both, at::Generator& generator);

// delta W = kron(W1, W2) * scale reshaped to `weight_shape`, in the factors' dtype;
// differentiable in the factors. scale is alpha / rank (1 when full()), times the multiplier.
at::Tensor lokr_delta_weight(const LoKrFactors& f, double scale,
                             const std::vector<int64_t>& weight_shape);

// The module's rank as LyCORIS make_module_from_state_dict reads it: w1_a's or w2_a's second
// dimension, 1 when both halves are full.
int64_t lokr_rank(const LoKrFactors& f);

// "" when the factors form a delta W of `weight_shape`, else what does not fit.
std::string lokr_shape_problem(const LoKrFactors& f, const std::vector<int64_t>& weight_shape);

}  // namespace lf
