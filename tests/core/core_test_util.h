// Test helpers for lf_train_core: the name-hashed reference tensors that
// tests/core/reference/make_core_references.py also builds (bit-identical, integer hashing
// only), and tensor comparison utilities.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace lf::test {

// float32 tensor of `shape` with values 2 * (splitmix64_k(fnv1a64(key)) >> 11) * 2^-53 - 1,
// k = 1..numel (in [-1, 1)), times `scale` (in float64, then rounded).
torch::Tensor reference_values(const std::string& key, const std::vector<int64_t>& shape,
                               double scale = 1.0);

// Reference parameter: >= 2-D v * sqrt(3 / fan_in); 1-D "...weight" 1 + 0.1 v; other 1-D 0.1 v.
torch::Tensor reference_param(const std::string& key, const std::vector<int64_t>& shape);

// Copies reference_param(name, shape) into every parameter of `module` (names as registered).
void fill_reference_weights(torch::nn::Module& module);

// A float32 tensor holding a copy of `values` with `shape`.
torch::Tensor from_array(const float* values, const std::vector<int64_t>& shape);
template <size_t N>
torch::Tensor from_array(const float* values, const std::array<int64_t, N>& shape) {
  return from_array(values, std::vector<int64_t>(shape.begin(), shape.end()));
}

// max |a - b| as double (shapes must match).
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b);

// Sorted names of `module`'s parameters.
std::vector<std::string> parameter_names(const torch::nn::Module& module);

}  // namespace lf::test
