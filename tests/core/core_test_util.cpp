// Name-hashed reference tensors (mirrors make_core_references.py ref_values / ref_param) and
// comparison helpers for the core tests.
#include "core_test_util.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

namespace lf::test {
namespace {

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h;
}

std::vector<double> values_f64(const std::string& key, int64_t n) {
  const uint64_t h = fnv1a64(key);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t k = 1; k <= n; ++k) {
    uint64_t z = h + static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z = z ^ (z >> 31);
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    out[static_cast<size_t>(k - 1)] = 2.0 * u - 1.0;
  }
  return out;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

torch::Tensor to_tensor(const std::vector<double>& v, const std::vector<int64_t>& shape) {
  std::vector<float> f(v.begin(), v.end());
  return torch::from_blob(f.data(), shape, torch::kFloat32).clone();  // owning, not a view
}

}  // namespace

torch::Tensor reference_values(const std::string& key, const std::vector<int64_t>& shape,
                               double scale) {
  std::vector<double> v = values_f64(key, numel_of(shape));
  for (double& x : v) x *= scale;
  return to_tensor(v, shape);
}

torch::Tensor reference_param(const std::string& key, const std::vector<int64_t>& shape) {
  const int64_t n = numel_of(shape);
  std::vector<double> v = values_f64(key, n);
  const bool is_weight = key.size() >= 6 && key.compare(key.size() - 6, 6, "weight") == 0;
  if (shape.size() >= 2) {
    const double gain = std::sqrt(3.0 / static_cast<double>(n / shape[0]));
    for (double& x : v) x = x * gain;
  } else if (is_weight) {
    for (double& x : v) x = 1.0 + 0.1 * x;
  } else {
    for (double& x : v) x = 0.1 * x;
  }
  return to_tensor(v, shape);
}

void fill_reference_weights(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.named_parameters()) {
    p.value().copy_(reference_param(p.key(), p.value().sizes().vec()));
  }
}

torch::Tensor from_array(const float* values, const std::vector<int64_t>& shape) {
  return torch::from_blob(const_cast<float*>(values), shape, torch::kFloat32).clone();
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

std::vector<std::string> parameter_names(const torch::nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& p : module.named_parameters()) names.push_back(p.key());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace lf::test
