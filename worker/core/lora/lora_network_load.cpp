// LoRANetwork's loading side: the ranks of a file's modules (dim_from_weights), copying a kohya
// state dict into the adapters with its checks and hints, and loading a LoRA file of any layout
// normalize_lora_state_dict accepts.
#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

#include "lora/lora_network.h"

namespace lf {
namespace {

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

// [a, b] and [a, b, 1, 1] hold the same Linear / 1x1-conv matrix.
std::vector<int64_t> squeezed(const torch::Tensor& t) {
  std::vector<int64_t> s = t.sizes().vec();
  while (s.size() > 2 && s.back() == 1) s.pop_back();
  return s;
}

bool loadable(const torch::Tensor& file, const torch::Tensor& target) {
  return file.sizes() == target.sizes() || squeezed(file) == squeezed(target);
}

// guess_lora_family results that cannot be the same model ("SD 1.x/2.x" fits either SD).
bool families_conflict(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty() || a == b) return false;
  if (a == "SDXL" || b == "SDXL") return true;
  return a != "SD 1.x/2.x" && b != "SD 1.x/2.x";
}

}  // namespace

std::map<std::string, LoRAModuleDim> lora_module_dims(
    const std::map<std::string, torch::Tensor>& kohya_tensors) {
  std::map<std::string, LoRAModuleDim> dims;
  for (const auto& [key, t] : kohya_tensors) {
    std::string name;
    for (const std::string rank_of : {".lora_down.weight", ".hada_w1_b", ".oft_blocks"}) {
      if (key.size() > rank_of.size() &&
          key.compare(key.size() - rank_of.size(), rank_of.size(), rank_of) == 0) {
        name = key.substr(0, key.size() - rank_of.size());
      }
    }
    if (name.empty()) continue;
    if (t.dim() < 2) {
      throw std::invalid_argument("lora_module_dims: " + key + " has " + shape_of(t) +
                                  ", expected [rank, ...]");
    }
    LoRAModuleDim& d = dims[name];
    d.rank = t.size(0);
    auto alpha = kohya_tensors.find(name + ".alpha");  // kohya: "support old LoRA without alpha"
    d.alpha = alpha != kohya_tensors.end() ? alpha->second.to(torch::kFloat64).item<double>()
                                           : static_cast<double>(d.rank);
  }
  return dims;
}

std::string LoRANetwork::load_hints(const std::map<std::string, torch::Tensor>& weights,
                                    const std::vector<std::string>& unexpected,
                                    const std::vector<std::string>& mismatched) const {
  // What a user continuing a LoRA most often has to change: the network options that decide
  // which modules exist, and the rank.
  std::string hints;
  bool te = false, unet = false, locon = false;
  static const char* kLoConParts[] = {"_resnets_",        "_downsamplers_", "_upsamplers_",
                                      "_in_layers_",      "_out_layers_",   "_emb_layers_",
                                      "_skip_connection", "_0_op."};
  for (const std::string& k : unexpected) {
    if (k.rfind("lora_te", 0) == 0) te = true;
    if (k.rfind("lora_unet_", 0) == 0) {
      unet = true;
      for (const char* part : kLoConParts) locon = locon || k.find(part) != std::string::npos;
    }
  }
  if (te && !options_.train_text_encoder) {
    hints +=
        "\n  hint: the file has text-encoder modules (lora_te*), and "
        "network.network_train_unet_only: true leaves none in this network; set it to false "
        "to continue them";
  }
  if (unet && !options_.train_unet) {
    hints +=
        "\n  hint: the file has UNet modules (lora_unet_*), and "
        "network.network_train_text_encoder_only: true leaves none in this network; set it "
        "to false to continue them";
  } else if (locon && options_.conv_dim == 0) {
    hints +=
        "\n  hint: the file has LoCon modules (ResBlock / sampler convs); set "
        "network.conv_dim (and conv_alpha) to the file's to continue them";
  }
  // The file's adapter kind against the network's (network.algo).
  const bool file_loha = std::any_of(unexpected.begin(), unexpected.end(), [](const auto& k) {
    return k.find(".hada_w") != std::string::npos;
  });
  const bool file_lora = std::any_of(unexpected.begin(), unexpected.end(), [](const auto& k) {
    return k.find(".lora_down.") != std::string::npos;
  });
  const bool file_oft = std::any_of(unexpected.begin(), unexpected.end(), [](const auto& k) {
    return k.find(".oft_blocks") != std::string::npos;
  });
  if (file_oft && options_.algo != LoRAAlgo::kOFT) {
    hints += "\n  hint: the file is a kohya OFT (oft_blocks tensors); set network.algo: oft";
  } else if (file_lora && options_.algo == LoRAAlgo::kOFT) {
    hints += "\n  hint: the file is a LoRA (lora_down / lora_up); set network.algo: lora";
  } else if (file_loha && options_.algo != LoRAAlgo::kLoHa) {
    hints += "\n  hint: the file is a LyCORIS LoHa (hada_* tensors); set network.algo: loha";
  } else if (file_lora && options_.algo == LoRAAlgo::kLoHa) {
    hints += "\n  hint: the file is a LoRA (lora_down / lora_up); set network.algo: lora";
  }
  // A rank that differs from network_dim / conv_dim: name the file's.
  for (const std::string& m : mismatched) {
    const auto oft = m.find(".oft_blocks");
    if (oft != std::string::npos) {
      auto it = weights.find(m.substr(0, oft) + ".oft_blocks");
      if (it == weights.end() || it->second.dim() != 3) continue;
      hints += "\n  hint: the file's OFT modules have " + std::to_string(it->second.size(0)) +
               " blocks; set network.network_dim: " + std::to_string(it->second.size(0)) +
               " to continue it";
      break;
    }
    const auto dot = m.find(".lora_down.weight");
    if (dot == std::string::npos) continue;
    auto it = weights.find(m.substr(0, dot) + ".lora_down.weight");
    if (it == weights.end() || it->second.dim() < 2) continue;
    const bool conv3 = it->second.dim() == 4 && it->second.size(2) > 1;
    hints += "\n  hint: the file's " + std::string(conv3 ? "3x3-conv modules" : "modules") +
             " are rank " + std::to_string(it->second.size(0)) + "; set network." +
             (conv3 ? "conv_dim" : "network_dim") + ": " + std::to_string(it->second.size(0)) +
             " to continue it";
    break;
  }
  return hints;
}

LoRALoadReport LoRANetwork::load_state_dict(const std::map<std::string, torch::Tensor>& weights,
                                            bool allow_missing_modules) {
  LoRALoadReport report;
  std::vector<std::string> missing, mismatched, unexpected;
  std::map<std::string, bool> known;
  std::map<std::string, bool> present;  // module -> in the file
  for (const auto& entry : modules_) {
    const Module& m = entry.second;
    const std::string alpha_key = entry.first + ".alpha";
    const auto parts = adapter_tensors(*m.adapter);
    known[alpha_key] = true;
    bool any = weights.count(alpha_key) != 0;
    for (const auto& part : parts) {
      known[entry.first + part.first] = true;
      any = any || weights.count(entry.first + part.first);
    }
    present[entry.first] = any;
    if (!any && allow_missing_modules) {
      report.missing_modules.push_back(entry.first);
      continue;
    }
    for (const auto& part : parts) {
      const std::string key = entry.first + part.first;
      auto it = weights.find(key);
      if (it == weights.end()) {
        missing.push_back(key);
      } else if (!loadable(it->second, *part.second)) {
        mismatched.push_back(key + ": expected " + shape_of(*part.second) + ", found " +
                             shape_of(it->second));
      }
    }
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
    if (!unexpected.empty()) {
      const std::string file_family = guess_lora_family(weights);
      const std::string own_family = guess_lora_family(state_dict());
      if (families_conflict(file_family, own_family)) {
        message += "\n  the keys look made for " + file_family + ", but the model is " +
                   own_family + " (a LoRA only continues on the model family it was trained on)";
      }
      message += "\n  " + std::to_string(unexpected.size()) +
                 " keys match no module of the network: " + join_first(unexpected);
    }
    if (!missing.empty()) {
      message += "\n  " + std::to_string(missing.size()) + " missing keys: " + join_first(missing);
    }
    for (const auto& m : mismatched) message += "\n  shape mismatch for " + m;
    message += load_hints(weights, unexpected, mismatched);
    throw std::runtime_error(message);
  }

  torch::NoGradGuard no_grad;
  for (auto& entry : modules_) {
    if (!present[entry.first]) continue;
    Module& m = entry.second;
    for (auto& part : adapter_tensors(*m.adapter)) {
      part.second->copy_(weights.at(entry.first + part.first).reshape(part.second->sizes()));
    }
    auto it = weights.find(entry.first + ".alpha");
    if (m.adapter->oft.defined()) {  // kohya networks.oft: alpha as saved, the constraint factor
      if (it != weights.end()) m.alpha = it->second.to(torch::kFloat64).item<double>();
      const torch::Tensor& blocks = m.adapter->oft.blocks;
      m.adapter->oft.constraint = m.alpha * static_cast<double>(blocks.size(0) * blocks.size(1));
      ++report.loaded_modules;
      continue;
    }
    m.alpha = it != weights.end() ? it->second.to(torch::kFloat64).item<double>()
                                  : static_cast<double>(m.rank);
    m.alpha = kohya_alpha(m.alpha, m.rank);
    if (m.adapter->lokr.full()) m.alpha = static_cast<double>(m.rank);  // LyCORIS: scale 1
    m.adapter->scale = m.alpha / static_cast<double>(m.rank);
    ++report.loaded_modules;
  }
  return report;
}

LoRALoadReport LoRANetwork::load_weights(const std::map<std::string, torch::Tensor>& tensors,
                                         const std::map<std::string, PeftAdapterConfig>& peft) {
  NormalizedLoRA normalized = normalize_lora_state_dict(tensors, key_context_, peft);
  LoRALoadReport report = load_state_dict(normalized.tensors, /*allow_missing_modules=*/true);
  report.variants = normalized.variants;
  return report;
}

}  // namespace lf
