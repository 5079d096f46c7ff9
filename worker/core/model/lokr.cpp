// LyCORIS LoKr factors, init and weight update (see header).
#include "model/lokr.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

namespace lf {
namespace {

// "[4, 8]", c10's ArrayRef printing.
std::string shape_text(const at::Tensor& t) { return t.defined() ? c10::str(t.sizes()) : "-"; }

// torch.nn.init.kaiming_uniform_(t, a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
at::Tensor kaiming(std::vector<int64_t> shape, at::Generator& generator) {
  int64_t fan_in = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return torch::empty(shape, torch::dtype(torch::kFloat32)).uniform_(-bound, bound, generator);
}

// W1 [a, c] and W2 [b, d, ...] of the factors.
at::Tensor w1_of(const LoKrFactors& f) {
  return f.w1.defined() ? f.w1 : at::matmul(f.w1_a, f.w1_b);
}
at::Tensor w2_of(const LoKrFactors& f) {
  return f.w2.defined() ? f.w2 : at::matmul(f.w2_a, f.w2_b);
}

}  // namespace

std::pair<int64_t, int64_t> lokr_factorization(int64_t dimension, int64_t factor) {
  if (factor > 0 && dimension % factor == 0) {
    const int64_t m = factor, n = dimension / factor;
    return m > n ? std::make_pair(n, m) : std::make_pair(m, n);
  }
  if (factor < 0) factor = dimension;
  int64_t m = 1, n = dimension;
  const int64_t length = m + n;
  while (m < n) {
    int64_t new_m = m + 1;
    while (dimension % new_m != 0) ++new_m;
    const int64_t new_n = dimension / new_m;
    if (new_m + new_n > length || new_m > factor) break;
    m = new_m;
    n = new_n;
  }
  return m > n ? std::make_pair(n, m) : std::make_pair(m, n);
}

LoKrFactors init_lokr(const std::vector<int64_t>& weight_shape, int64_t rank, int64_t factor,
                      bool decompose_both, at::Generator& generator) {
  const auto [c, d] = lokr_factorization(weight_shape.at(1), factor);  // in = c d
  const auto [a, b] = lokr_factorization(weight_shape.at(0), factor);  // out = a b
  int64_t kernel = 1;
  for (std::size_t i = 2; i < weight_shape.size(); ++i) kernel *= weight_shape[i];
  const double r = static_cast<double>(rank);
  LoKrFactors f;
  // LyCORIS draws w2's factor first, then w1's.
  if (r >= std::max(b, d) / 2.0) {
    std::vector<int64_t> w2_shape = {b, d};
    w2_shape.insert(w2_shape.end(), weight_shape.begin() + 2, weight_shape.end());
    f.w2 = torch::zeros(w2_shape, torch::dtype(torch::kFloat32));
  } else {
    f.w2_a = kaiming({b, rank}, generator);
    f.w2_b = torch::zeros({rank, d * kernel}, torch::dtype(torch::kFloat32));
  }
  if (decompose_both && r < std::max(a, c) / 2.0) {
    f.w1_a = kaiming({a, rank}, generator);
    f.w1_b = kaiming({rank, c}, generator);
  } else {
    f.w1 = kaiming({a, c}, generator);
  }
  return f;
}

at::Tensor lokr_delta_weight(const LoKrFactors& f, double scale,
                             const std::vector<int64_t>& weight_shape) {
  at::Tensor w1 = w1_of(f);
  const at::Tensor w2 = w2_of(f).contiguous();
  while (w1.dim() < w2.dim()) w1 = w1.unsqueeze(-1);  // make_kron: broadcast over the kernel
  return (at::kron(w1, w2) * scale).reshape(weight_shape);
}

int64_t lokr_rank(const LoKrFactors& f) {
  if (f.w1_a.defined()) return f.w1_a.size(1);
  if (f.w2_a.defined()) return f.w2_a.size(1);
  return 1;
}

std::string lokr_shape_problem(const LoKrFactors& f, const std::vector<int64_t>& weight_shape) {
  const bool one_w1 = f.w1.defined() != (f.w1_a.defined() && f.w1_b.defined()) &&
                      f.w1_a.defined() == f.w1_b.defined();
  const bool one_w2 = f.w2.defined() != (f.w2_a.defined() && f.w2_b.defined()) &&
                      f.w2_a.defined() == f.w2_b.defined();
  bool ok = one_w1 && one_w2 && weight_shape.size() >= 2;
  if (ok) {
    for (const at::Tensor* t : {&f.w1, &f.w1_a, &f.w1_b, &f.w2_a, &f.w2_b}) {
      ok = ok && (!t->defined() || t->dim() == 2);
    }
    ok = ok && (!f.w1_a.defined() || f.w1_a.size(1) == f.w1_b.size(0));
    ok = ok && (!f.w2_a.defined() || f.w2_a.size(1) == f.w2_b.size(0));
  }
  if (ok) {
    int64_t numel = 1;
    for (int64_t s : weight_shape) numel *= s;
    const int64_t a = f.w1.defined() ? f.w1.size(0) : f.w1_a.size(0);
    const int64_t c = f.w1.defined() ? f.w1.size(1) : f.w1_b.size(1);
    const int64_t b = f.w2.defined() ? f.w2.size(0) : f.w2_a.size(0);
    const int64_t w2_cols = f.w2.defined() ? f.w2.numel() / b : f.w2_b.size(1);
    ok = a * b == weight_shape[0] && a * b * c * w2_cols == numel && weight_shape[1] % c == 0 &&
         (f.w2.dim() <= 2 || f.w2.dim() == int64_t(weight_shape.size()));
  }
  if (ok) return "";
  std::string layer = "[";
  for (std::size_t i = 0; i < weight_shape.size(); ++i) {
    layer += (i ? ", " : "") + std::to_string(weight_shape[i]);
  }
  return "LoKr factors lokr_w1 " + shape_text(f.w1) + " / lokr_w1_a " + shape_text(f.w1_a) +
         " / lokr_w1_b " + shape_text(f.w1_b) + " / lokr_w2 " + shape_text(f.w2) + " / lokr_w2_a " +
         shape_text(f.w2_a) + " / lokr_w2_b " + shape_text(f.w2_b) +
         " do not form a layer weight " + layer + "] (kron(W1 [a, c], W2 [b, d, ...]))";
}

}  // namespace lf
