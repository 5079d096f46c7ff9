// kohya networks.lora.LoRANetwork for the SD UNet: target discovery inside SpatialTransformers,
// diffusers-path key naming, kaiming/zero init, and the kohya state-dict layout.
#include "lora/lora_network.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <torch/torch.h>

#include "model/attention.h"
#include "model/state_dict.h"

namespace lf {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

bool parse_index(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 6) return false;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
  }
  *out = std::stoll(s);
  return true;
}

std::string shape_of(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

std::string join_first(const std::vector<std::string>& keys, size_t limit = 8) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < limit; ++i) s += (i ? ", " : "") + keys[i];
  if (keys.size() > limit) s += ", ... (" + std::to_string(keys.size()) + " in total)";
  return s;
}

}  // namespace

std::string ldm_to_diffusers_attention_path(const std::string& ldm_path, int64_t num_res_blocks) {
  const std::vector<std::string> parts = split(ldm_path, '.');
  auto fail = [&]() -> std::string {
    throw std::invalid_argument("not a UNet SpatialTransformer path: \"" + ldm_path + "\"");
  };
  int64_t n = 0;
  if (parts.size() < 2 || !parse_index(parts[1], &n)) return fail();
  const int64_t stride = num_res_blocks + 1;
  std::string head;
  size_t rest = 3;  // first part after the SpatialTransformer itself
  if (parts[0] == "middle_block") {
    if (n != 1) return fail();
    head = "mid_block.attentions.0";
    rest = 2;
  } else if (parts.size() < 3 || parts[2] != "1") {
    return fail();
  } else if (parts[0] == "input_blocks") {
    if (n < 1 || (n - 1) % stride == num_res_blocks) return fail();  // conv_in / downsample
    head = "down_blocks." + std::to_string((n - 1) / stride) + ".attentions." +
           std::to_string((n - 1) % stride);
  } else if (parts[0] == "output_blocks") {
    head = "up_blocks." + std::to_string(n / stride) + ".attentions." + std::to_string(n % stride);
  } else {
    return fail();
  }
  for (size_t i = rest; i < parts.size(); ++i) head += "." + parts[i];
  return head;
}

std::string kohya_lora_name(const std::string& diffusers_path) {
  std::string name = "lora_unet_" + diffusers_path;
  for (char& ch : name) {
    if (ch == '.') ch = '_';
  }
  return name;
}

LoRANetwork::LoRANetwork(UNetModel& unet, int64_t network_dim, double network_alpha,
                         at::Generator& generator)
    : network_dim_(network_dim), network_alpha_(network_alpha) {
  if (network_dim <= 0) {
    throw std::invalid_argument("LoRANetwork: network_dim must be > 0, got " +
                                std::to_string(network_dim));
  }
  if (!(network_alpha > 0)) network_alpha_ = static_cast<double>(network_dim);  // kohya default
  freeze_parameters(*unet);

  const int64_t num_res_blocks = unet->config().num_res_blocks;
  for (const auto& st : unet->named_modules("", /*include_self=*/false)) {
    if (!st.value()->as<SpatialTransformerImpl>()) continue;
    const std::string base = ldm_to_diffusers_attention_path(st.key(), num_res_blocks);
    for (const auto& sub : st.value()->named_modules("", /*include_self=*/false)) {
      Module m;
      m.alpha = network_alpha_;
      m.linear = std::dynamic_pointer_cast<LoRACompatibleLinearImpl>(sub.value());
      m.conv = std::dynamic_pointer_cast<LoRACompatibleConv1x1Impl>(sub.value());
      if (!m.linear && !m.conv) continue;
      const bool busy = m.linear ? m.linear->adapter() != nullptr : m.conv->adapter() != nullptr;
      if (busy) {
        throw std::invalid_argument("LoRANetwork: UNet layer " + st.key() + "." + sub.key() +
                                    " already carries a LoRA adapter");
      }
      modules_.emplace(kohya_lora_name(base + "." + sub.key()), std::move(m));
    }
  }

  torch::NoGradGuard no_grad;
  const double scale = network_alpha_ / static_cast<double>(network_dim_);
  for (auto& entry : modules_) {  // sorted by name: the generator draw order
    Module& m = entry.second;
    const torch::Tensor& weight = m.linear ? m.linear->weight() : m.conv->weight();
    const int64_t in = m.linear ? m.linear->in_features() : m.conv->in_channels();
    const int64_t out = m.linear ? m.linear->out_features() : m.conv->out_channels();
    const auto f32 = torch::dtype(torch::kFloat32);
    auto adapter = std::make_shared<LoRAAdapter>();
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    adapter->down = torch::empty({network_dim_, in}, f32).uniform_(-bound, bound, generator);
    adapter->up = torch::zeros({out, network_dim_}, f32);
    if (m.conv) {
      adapter->down = adapter->down.view({network_dim_, in, 1, 1});
      adapter->up = adapter->up.view({out, network_dim_, 1, 1});
    }
    adapter->down = adapter->down.to(weight.device()).contiguous();
    adapter->up = adapter->up.to(weight.device()).contiguous();
    adapter->down.set_requires_grad(true);
    adapter->up.set_requires_grad(true);
    adapter->scale = scale;
    if (m.linear) {
      m.linear->set_adapter(adapter);
    } else {
      m.conv->set_adapter(adapter);
    }
    m.adapter = std::move(adapter);
  }
}

LoRANetwork::~LoRANetwork() {
  for (auto& entry : modules_) {
    Module& m = entry.second;
    if (m.linear && m.linear->adapter() == m.adapter) m.linear->set_adapter(nullptr);
    if (m.conv && m.conv->adapter() == m.adapter) m.conv->set_adapter(nullptr);
  }
}

std::vector<std::string> LoRANetwork::module_names() const {
  std::vector<std::string> names;
  names.reserve(modules_.size());
  for (const auto& entry : modules_) names.push_back(entry.first);
  return names;
}

std::vector<torch::Tensor> LoRANetwork::parameters() const {
  std::vector<torch::Tensor> params;
  params.reserve(2 * modules_.size());
  for (const auto& entry : modules_) {
    params.push_back(entry.second.adapter->down);
    params.push_back(entry.second.adapter->up);
  }
  return params;
}

std::vector<std::string> LoRANetwork::parameter_names() const {
  std::vector<std::string> names;
  names.reserve(2 * modules_.size());
  for (const auto& entry : modules_) {
    names.push_back(entry.first + ".lora_down.weight");
    names.push_back(entry.first + ".lora_up.weight");
  }
  return names;
}

size_t LoRANetwork::num_parameters() const {
  size_t n = 0;
  for (const auto& p : parameters()) n += static_cast<size_t>(p.numel());
  return n;
}

void LoRANetwork::set_multiplier(double multiplier) {
  for (auto& entry : modules_) entry.second.adapter->multiplier = multiplier;
}

std::map<std::string, torch::Tensor> LoRANetwork::state_dict() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& entry : modules_) {
    const Module& m = entry.second;
    out[entry.first + ".lora_down.weight"] = m.adapter->down.detach();
    out[entry.first + ".lora_up.weight"] = m.adapter->up.detach();
    out[entry.first + ".alpha"] = torch::scalar_tensor(m.alpha, torch::dtype(torch::kFloat32));
  }
  return out;
}

void LoRANetwork::load_state_dict(const std::map<std::string, torch::Tensor>& weights) {
  std::vector<std::string> missing, mismatched, unexpected;
  std::map<std::string, bool> known;
  for (const auto& entry : modules_) {
    const Module& m = entry.second;
    const std::pair<std::string, const torch::Tensor*> parts[] = {
        {entry.first + ".lora_down.weight", &m.adapter->down},
        {entry.first + ".lora_up.weight", &m.adapter->up}};
    for (const auto& part : parts) {
      known[part.first] = true;
      auto it = weights.find(part.first);
      if (it == weights.end()) {
        missing.push_back(part.first);
      } else if (it->second.sizes() != part.second->sizes()) {
        mismatched.push_back(part.first + ": expected " + shape_of(*part.second) + ", found " +
                             shape_of(it->second));
      }
    }
    const std::string alpha_key = entry.first + ".alpha";
    known[alpha_key] = true;
    auto it = weights.find(alpha_key);
    if (it != weights.end() && it->second.numel() != 1) {
      mismatched.push_back(alpha_key + ": expected a scalar, found " + shape_of(it->second));
    }
  }
  for (const auto& entry : weights) {
    if (!known.count(entry.first)) unexpected.push_back(entry.first);
  }
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::string message = "cannot load LoRA weights:";
    if (!missing.empty()) {
      message += "\n  " + std::to_string(missing.size()) + " missing keys: " + join_first(missing);
    }
    for (const auto& m : mismatched) message += "\n  shape mismatch for " + m;
    if (!unexpected.empty()) {
      message += "\n  " + std::to_string(unexpected.size()) +
                 " unexpected keys: " + join_first(unexpected);
    }
    throw std::runtime_error(message);
  }

  torch::NoGradGuard no_grad;
  for (auto& entry : modules_) {
    Module& m = entry.second;
    m.adapter->down.copy_(weights.at(entry.first + ".lora_down.weight"));
    m.adapter->up.copy_(weights.at(entry.first + ".lora_up.weight"));
    auto it = weights.find(entry.first + ".alpha");
    m.alpha = it != weights.end() ? it->second.to(torch::kFloat64).item<double>()
                                  : static_cast<double>(network_dim_);
    if (!(m.alpha > 0)) m.alpha = static_cast<double>(network_dim_);  // kohya: 0 / None -> r
    m.adapter->scale = m.alpha / static_cast<double>(network_dim_);
  }
}

}  // namespace lf
