// Strict weight loading / exporting by checkpoint key for the SD models
// (torch.nn.Module.load_state_dict(strict=True) semantics plus ignorable keys).
#include "model/state_dict.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include <torch/torch.h>

namespace lf {
namespace {

constexpr size_t kListedKeys = 8;  // keys listed per error category

std::string shape_of(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

std::string list_keys(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  std::string s;
  for (size_t i = 0; i < keys.size() && i < kListedKeys; ++i) s += (i ? ", " : "") + keys[i];
  if (keys.size() > kListedKeys) s += ", ... (" + std::to_string(keys.size()) + " in total)";
  return s;
}

// Source reshaped to the destination's shape when they differ only by trailing 1x1 dims.
bool fit_shape(const torch::Tensor& src, const torch::Tensor& dst, torch::Tensor* out) {
  if (src.sizes() == dst.sizes()) {
    *out = src;
    return true;
  }
  const bool linear_to_conv = src.dim() == 2 && dst.dim() == 4 && dst.size(2) == 1 &&
                              dst.size(3) == 1 && src.size(0) == dst.size(0) &&
                              src.size(1) == dst.size(1);
  const bool conv_to_linear = src.dim() == 4 && dst.dim() == 2 && src.size(2) == 1 &&
                              src.size(3) == 1 && src.size(0) == dst.size(0) &&
                              src.size(1) == dst.size(1);
  if (!linear_to_conv && !conv_to_linear) return false;
  *out = src.reshape(dst.sizes());
  return true;
}

}  // namespace

void load_module_weights(torch::nn::Module& module, const WeightMap& weights,
                         const std::string& prefix, const IgnorableKey& is_ignorable,
                         const std::string& model_name) {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (destination, source)
  std::vector<std::string> missing;
  std::vector<std::string> mismatched;
  std::unordered_set<std::string> known;

  auto visit = [&](const std::string& name, torch::Tensor& dst) {
    const std::string key = prefix + name;
    known.insert(key);
    auto it = weights.find(key);
    if (it == weights.end()) {
      missing.push_back(key);
      return;
    }
    torch::Tensor src;
    if (!fit_shape(it->second, dst, &src)) {
      mismatched.push_back(key + ": expected " + shape_of(dst) + ", found " + shape_of(it->second));
      return;
    }
    copies.emplace_back(dst, src);
  };
  for (auto& item : module.named_parameters(/*recurse=*/true)) visit(item.key(), item.value());
  for (auto& item : module.named_buffers(/*recurse=*/true)) visit(item.key(), item.value());

  std::vector<std::string> unexpected;
  for (const auto& entry : weights) {
    const std::string& key = entry.first;
    if (key.compare(0, prefix.size(), prefix) != 0 || known.count(key)) continue;
    if (is_ignorable && is_ignorable(key.substr(prefix.size()))) continue;
    unexpected.push_back(key);
  }

  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::string message = "cannot load " + model_name + " weights (prefix \"" + prefix + "\"):";
    if (!missing.empty()) {
      message += "\n  " + std::to_string(missing.size()) + " missing keys: " + list_keys(missing);
    }
    for (size_t i = 0; i < mismatched.size() && i < kListedKeys; ++i) {
      message += "\n  shape mismatch for " + mismatched[i];
    }
    if (mismatched.size() > kListedKeys) {
      message += "\n  ... " + std::to_string(mismatched.size()) + " shape mismatches in total";
    }
    if (!unexpected.empty()) {
      message +=
          "\n  " + std::to_string(unexpected.size()) + " unexpected keys: " + list_keys(unexpected);
    }
    throw std::runtime_error(message);
  }

  torch::NoGradGuard no_grad;
  for (auto& copy : copies) copy.first.copy_(copy.second);
}

WeightMap module_weights(const torch::nn::Module& module, const std::string& prefix) {
  WeightMap out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    out.emplace(prefix + item.key(), item.value().detach());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    out.emplace(prefix + item.key(), item.value().detach());
  }
  return out;
}

void freeze_parameters(torch::nn::Module& module) {
  for (auto& p : module.parameters(/*recurse=*/true)) p.set_requires_grad(false);
}

}  // namespace lf
