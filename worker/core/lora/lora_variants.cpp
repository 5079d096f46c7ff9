// LoRA file layout normalisation to kohya keys (see header).
#include "lora/lora_variants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <set>
#include <stdexcept>

#include <torch/torch.h>

#include "model/lokr.h"

namespace lf {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::string underscored(std::string s) {
  for (char& ch : s) {
    if (ch == '.') ch = '_';
  }
  return s;
}

[[noreturn]] void refuse(const std::string& variant, const std::string& key) {
  throw std::runtime_error("LoRA weights use " + variant +
                           ", which lorafleet cannot load to continue training (first such key: '" +
                           key +
                           "'); only plain LoRA / LoCon (lora_down, lora_up, alpha), LyCORIS "
                           "LoHa (hada_*) and LoKr (lokr_w1*, lokr_w2*) and kohya OFT "
                           "(oft_blocks) are supported");
}

// Refuses the non-LoRA adapter kinds sd.cpp recognises (and DoRA, which it does not support).
void check_supported(const std::string& key) {
  if (key.find("hada_t1") != std::string::npos || key.find("hada_t2") != std::string::npos) {
    refuse("LoHa with a Tucker decomposition (LyCORIS hada_t1 / hada_t2 tensors)", key);
  }
  if (key.find("lokr_t") != std::string::npos) {
    refuse("LoKr with a Tucker decomposition (LyCORIS lokr_t2 tensors)", key);
  }
  if (key.find("lora_magnitude_vector") != std::string::npos) {
    refuse("PEFT DoRA (lora_magnitude_vector magnitude tensors)", key);
  }
  if (key.find("lora_mid") != std::string::npos) {
    refuse("LoCon with a Tucker/CP decomposition (lora_mid tensors)", key);
  }
  if (ends_with(key, ".diff") || ends_with(key, ".diff_b")) {
    refuse("full weight differences (.diff / .diff_b tensors)", key);
  }
}

enum class Part {
  kDora,
  kDown,
  kUp,
  kAlpha,
  kScale,
  kW1a,
  kW1b,
  kW2a,
  kW2b,
  kK1,
  kK1a,
  kK1b,
  kK2,
  kK2a,
  kK2b,
  kOft
};

struct Suffix {
  const char* text;
  Part part;
  const char* variant;
};

// Longest spellings first where one ends another.
const Suffix kSuffixes[] = {
    {".lora_down.weight", Part::kDown, "kohya"},
    {".lora_up.weight", Part::kUp, "kohya"},
    {".lora_linear_layer.down.weight", Part::kDown, "diffusers lora_linear_layer"},
    {".lora_linear_layer.up.weight", Part::kUp, "diffusers lora_linear_layer"},
    {".lora.down.weight", Part::kDown, "'.lora.down.weight' spelling"},
    {".lora.up.weight", Part::kUp, "'.lora.up.weight' spelling"},
    {"_lora.down.weight", Part::kDown, "old diffusers attention processor"},
    {"_lora.up.weight", Part::kUp, "old diffusers attention processor"},
    {".lora_A.default.weight", Part::kDown, "PEFT/diffusers (lora_A/lora_B)"},
    {".lora_B.default.weight", Part::kUp, "PEFT/diffusers (lora_A/lora_B)"},
    {".lora_A.weight", Part::kDown, "PEFT/diffusers (lora_A/lora_B)"},
    {".lora_B.weight", Part::kUp, "PEFT/diffusers (lora_A/lora_B)"},
    {".hada_w1_a", Part::kW1a, "LyCORIS LoHa"},
    {".hada_w1_b", Part::kW1b, "LyCORIS LoHa"},
    {".hada_w2_a", Part::kW2a, "LyCORIS LoHa"},
    {".hada_w2_b", Part::kW2b, "LyCORIS LoHa"},
    {".lokr_w1", Part::kK1, "LyCORIS LoKr"},
    {".lokr_w1_a", Part::kK1a, "LyCORIS LoKr"},
    {".lokr_w1_b", Part::kK1b, "LyCORIS LoKr"},
    {".lokr_w2", Part::kK2, "LyCORIS LoKr"},
    {".lokr_w2_a", Part::kK2a, "LyCORIS LoKr"},
    {".lokr_w2_b", Part::kK2b, "LyCORIS LoKr"},
    {".dora_scale", Part::kDora, "LyCORIS DoRA"},
    {".oft_blocks", Part::kOft, "kohya OFT"},
    {".alpha", Part::kAlpha, nullptr},
    {".scale", Part::kScale, nullptr},
};

struct Collected {
  at::Tensor down, up, alpha, scale;
  std::string down_key, up_key, alpha_key, scale_key;
  at::Tensor dora;  // LyCORIS dora_wd magnitude, any kind of module
  std::string dora_key;
  at::Tensor hada[4];  // LoHa hada_w1_a, hada_w1_b, hada_w2_a, hada_w2_b (kW1a ... kW2b order)
  std::string hada_key[4];
  at::Tensor lokr[6];  // LoKr lokr_w1, _w1_a, _w1_b, _w2, _w2_a, _w2_b (kK1 ... kK2b order)
  std::string lokr_key[6];
  at::Tensor oft;  // kohya networks.oft oft_blocks [k, b, b]
  std::string oft_key;
  double peft_alpha = 0.0;  // 0: none
  bool rslora = false;
};

bool has_prefix(const std::string& s, std::initializer_list<const char*> list) {
  for (const char* p : list) {
    if (starts_with(s, p)) return true;
  }
  return false;
}

// Old diffusers attention processors name the text-encoder projections like the UNet's.
std::string text_encoder_old_names(std::string path) {
  const std::pair<const char*, const char*> renames[] = {
      {"self_attn.to_q", "self_attn.q_proj"},
      {"self_attn.to_k", "self_attn.k_proj"},
      {"self_attn.to_v", "self_attn.v_proj"},
      {"self_attn.to_out", "self_attn.out_proj"}};
  for (const auto& r : renames) {
    if (ends_with(path, r.first))
      return path.substr(0, path.size() - std::strlen(r.first)) + r.second;
  }
  return path;
}

double pattern_alpha(const PeftAdapterConfig& c, const std::string& module_path) {
  // The longest matching pattern wins, as the most specific one.
  const std::string* best = nullptr;
  double alpha = c.lora_alpha;
  for (const auto& kv : c.alpha_pattern) {
    const bool match = module_path == kv.first || ends_with(module_path, "." + kv.first);
    if (match && (!best || kv.first.size() > best->size())) {
      best = &kv.first;
      alpha = kv.second;
    }
  }
  return alpha;
}

// The module's alpha: ".scale" x rank (sd.cpp: scale wins), ".alpha", the PEFT config's, else
// the rank (kohya / sd.cpp: no alpha means scale 1).
double module_alpha(const Collected& m, int64_t rank_dim) {
  const double rank = static_cast<double>(rank_dim);
  for (const auto* t : {&m.alpha, &m.scale}) {
    if (t->defined() && t->numel() != 1) {
      throw std::runtime_error("LoRA key '" + (t == &m.alpha ? m.alpha_key : m.scale_key) +
                               "': expected a scalar");
    }
  }
  if (m.scale.defined()) return m.scale.to(at::kDouble).item<double>() * rank;
  if (m.alpha.defined()) return m.alpha.to(at::kDouble).item<double>();
  if (m.peft_alpha > 0) return m.rslora ? m.peft_alpha * std::sqrt(rank) : m.peft_alpha;
  return rank;
}

// A LyCORIS LoHa module: all four hada_* factors (2-D, rank = hada_w1_b's first dimension, as
// LyCORIS LohaModule.make_module_from_state_dict), no lora_down / lora_up beside them.
void out_loha(const std::string& name, const Collected& m, std::map<std::string, at::Tensor>& out) {
  static const char* kParts[] = {".hada_w1_a", ".hada_w1_b", ".hada_w2_a", ".hada_w2_b"};
  const int have = m.hada[0].defined() ? 0 : m.hada[1].defined() ? 1 : m.hada[2].defined() ? 2 : 3;
  for (int i = 0; i < 4; ++i) {
    if (!m.hada[i].defined()) {
      throw std::runtime_error("LoHa module " + name + " is incomplete: it has '" +
                               m.hada_key[have] + "' but no " + std::string(kParts[i] + 1) +
                               " tensor");
    }
    if (m.hada[i].dim() != 2) {
      throw std::runtime_error("LoRA key '" + m.hada_key[i] + "': expected a 2-D LoHa factor");
    }
  }
  if (m.down.defined() || m.up.defined()) {
    throw std::runtime_error("LoRA module " + name + " has both LoHa (hada_*) and LoRA ('" +
                             (m.down.defined() ? m.down_key : m.up_key) + "') tensors");
  }
  for (int i = 0; i < 4; ++i) out[name + kParts[i]] = m.hada[i];
  out[name + ".alpha"] = torch::scalar_tensor(module_alpha(m, m.hada[1].size(0)), torch::kFloat32);
}

// A kohya networks.oft module: oft_blocks [k, b, b] and its alpha (the constraint factor, which
// kohya always saves), nothing else.
void out_oft(const std::string& name, const Collected& m, std::map<std::string, at::Tensor>& out) {
  if (m.oft.dim() != 3 || m.oft.size(1) != m.oft.size(2)) {
    throw std::runtime_error("LoRA key '" + m.oft_key + "': expected OFT blocks [k, b, b]");
  }
  if (m.down.defined() || m.up.defined() || m.hada[0].defined() || m.lokr[0].defined()) {
    throw std::runtime_error("OFT module " + name + " ('" + m.oft_key +
                             "') also has LoRA / LoHa / LoKr tensors");
  }
  if (!m.alpha.defined() || m.alpha.numel() != 1) {
    throw std::runtime_error("OFT module " + name + " ('" + m.oft_key + "') has no scalar " + name +
                             ".alpha (kohya networks.oft saves the constraint factor there)");
  }
  out[name + ".oft_blocks"] = m.oft;
  out[name + ".alpha"] = m.alpha.to(at::kFloat).reshape({});
}

// A LyCORIS LoKr module: lokr_w1 or lokr_w1_a + _b, and lokr_w2 or lokr_w2_a + _b (2-D, lokr_w2
// 2-D or 4-D), no lora_down / lora_up beside them; rank as LyCORIS make_module_from_state_dict.
void out_lokr(const std::string& name, const Collected& m, std::map<std::string, at::Tensor>& out) {
  static const char* kParts[] = {".lokr_w1", ".lokr_w1_a", ".lokr_w1_b",
                                 ".lokr_w2", ".lokr_w2_a", ".lokr_w2_b"};
  const int have = static_cast<int>(std::find_if(std::begin(m.lokr), std::end(m.lokr),
                                                 [](const at::Tensor& t) { return t.defined(); }) -
                                    std::begin(m.lokr));
  for (int half = 0; half < 2; ++half) {
    const at::Tensor* t = m.lokr + 3 * half;
    const bool full = t[0].defined(), low = t[1].defined() && t[2].defined();
    if (full == low || (!full && t[1].defined() != t[2].defined()) ||
        (full && (t[1].defined() || t[2].defined()))) {
      throw std::runtime_error("LoKr module " + name + " (it has '" + m.lokr_key[have] +
                               "') needs exactly one of " + kParts[3 * half] + " or " +
                               kParts[3 * half + 1] + " + " + kParts[3 * half + 2]);
    }
  }
  if (m.down.defined() || m.up.defined()) {
    throw std::runtime_error("LoRA module " + name + " has both LoKr (lokr_*) and LoRA ('" +
                             (m.down.defined() ? m.down_key : m.up_key) + "') tensors");
  }
  for (int i = 0; i < 6; ++i) {
    const bool conv_w2 = i == 3 && m.lokr[i].defined() && m.lokr[i].dim() == 4;
    if (m.lokr[i].defined() && m.lokr[i].dim() != 2 && !conv_w2) {
      throw std::runtime_error("LoRA key '" + m.lokr_key[i] + "': expected a 2-D LoKr factor" +
                               (i == 3 ? " (or a 4-D conv lokr_w2)" : ""));
    }
  }
  LoKrFactors f{m.lokr[0], m.lokr[1], m.lokr[2], m.lokr[3], m.lokr[4], m.lokr[5]};
  for (int i = 0; i < 6; ++i) {
    if (m.lokr[i].defined()) out[name + kParts[i]] = m.lokr[i];
  }
  out[name + ".alpha"] = torch::scalar_tensor(module_alpha(m, lokr_rank(f)), torch::kFloat32);
}

}  // namespace

NormalizedLoRA normalize_lora_state_dict(const std::map<std::string, at::Tensor>& tensors,
                                         const LoRAKeyContext& ctx,
                                         const std::map<std::string, PeftAdapterConfig>& peft) {
  std::map<std::string, Collected> modules;
  std::set<std::string> variants;
  for (const auto& [key, tensor] : tensors) {
    check_supported(key);
    const Suffix* suffix = nullptr;
    for (const Suffix& s : kSuffixes) {
      if (ends_with(key, s.text)) {
        suffix = &s;
        break;
      }
    }
    if (!suffix) {
      throw std::runtime_error(
          "unrecognised LoRA tensor key '" + key +
          "' (expected <module>.lora_down.weight / .lora_up.weight / .alpha, or the PEFT "
          "lora_A / lora_B spellings)");
    }
    std::string base = key.substr(0, key.size() - std::strlen(suffix->text));
    // Old diffusers attention processors: "attn1.processor.to_q" -> "attn1.to_q".
    for (size_t pos; (pos = base.find(".processor.")) != std::string::npos;) {
      base.erase(pos, std::strlen(".processor"));
    }
    std::string name;           // kohya lora_name
    std::string component;      // PEFT component, "" for kohya keys
    std::string relative_path;  // module path within the component (for alpha_pattern)
    if (starts_with(base, "lycoris_")) {
      base = "lora_" + base.substr(std::strlen("lycoris_"));
      variants.insert("LyCORIS prefix");
    }
    if (has_prefix(base, {"lora_unet_", "lora_te_", "lora_te1_", "lora_te2_", "oft_unet_"})) {
      name = base;
    } else {
      std::string path = base;
      int te = -1;
      if (starts_with(path, "unet.")) {
        path = path.substr(5);
        component = "unet";
      } else if (starts_with(path, "text_encoder_2.")) {
        path = path.substr(std::strlen("text_encoder_2."));
        component = "text_encoder_2";
        te = 1;
      } else if (starts_with(path, "text_encoder.")) {
        path = path.substr(std::strlen("text_encoder."));
        component = "text_encoder";
        te = 0;
      } else if (has_prefix(path, {"down_blocks.", "mid_block.", "up_blocks."})) {
        component = "unet";  // bare diffusers UNet names (attention-processor files)
      } else {
        throw std::runtime_error("unrecognised LoRA module name in key '" + key +
                                 "' (expected lora_unet_ / lora_te_ / lora_te1_ / lora_te2_ "
                                 "kohya names or unet. / text_encoder. / text_encoder_2. paths)");
      }
      relative_path = path;
      if (te >= 0) {
        path = text_encoder_old_names(path);
        // transformers 5's CLIPTextModel has no text_model submodule, so diffusers 0.4x PEFT
        // exports name text-encoder layers "encoder.layers.N..." directly.
        if (starts_with(path, "encoder.")) path = "text_model." + path;
        if (!starts_with(path, "text_model.")) {
          throw std::runtime_error("LoRA key '" + key +
                                   "': expected a text-encoder path under "
                                   "text_model. (HF CLIP names)");
        }
        std::string prefix = te == 0 ? "lora_te" : "lora_te2";
        if (static_cast<size_t>(te) < ctx.text_encoder_prefixes.size()) {
          prefix = ctx.text_encoder_prefixes[te];
        }
        name = prefix + "_" + underscored(path);
      } else {
        if (ends_with(path, ".to_out")) path += ".0";  // "to_out_lora" of the old processors
        if (ctx.unet.ldm_names) {
          try {
            path = diffusers_to_ldm_unet_path(path, ctx.unet);
          } catch (const std::invalid_argument& e) {
            throw std::runtime_error("LoRA key '" + key + "': " + e.what());
          }
        }
        name = "lora_unet_" + underscored(path);
      }
    }
    if (suffix->variant) variants.insert(suffix->variant);
    Collected& m = modules[name];
    at::Tensor* slot = nullptr;
    std::string* slot_key = nullptr;
    switch (suffix->part) {
      case Part::kDown:
        slot = &m.down;
        slot_key = &m.down_key;
        break;
      case Part::kUp:
        slot = &m.up;
        slot_key = &m.up_key;
        break;
      case Part::kAlpha:
        slot = &m.alpha;
        slot_key = &m.alpha_key;
        break;
      case Part::kScale:
        slot = &m.scale;
        slot_key = &m.scale_key;
        break;
      case Part::kDora:
        slot = &m.dora;
        slot_key = &m.dora_key;
        break;
      case Part::kOft:
        slot = &m.oft;
        slot_key = &m.oft_key;
        break;
      case Part::kW1a:
      case Part::kW1b:
      case Part::kW2a:
      case Part::kW2b: {
        const int i = static_cast<int>(suffix->part) - static_cast<int>(Part::kW1a);
        slot = &m.hada[i];
        slot_key = &m.hada_key[i];
        break;
      }
      case Part::kK1:
      case Part::kK1a:
      case Part::kK1b:
      case Part::kK2:
      case Part::kK2a:
      case Part::kK2b: {
        const int i = static_cast<int>(suffix->part) - static_cast<int>(Part::kK1);
        slot = &m.lokr[i];
        slot_key = &m.lokr_key[i];
        break;
      }
    }
    if (slot->defined()) {
      throw std::runtime_error("LoRA keys '" + *slot_key + "' and '" + key +
                               "' both map to module " + name);
    }
    *slot = tensor;
    *slot_key = key;
    if (!component.empty()) {
      auto it = peft.find(component);
      if (it == peft.end()) it = peft.find("");
      if (it != peft.end()) {
        m.peft_alpha = pattern_alpha(it->second, relative_path);
        m.rslora = it->second.use_rslora;
      }
    }
  }

  NormalizedLoRA out;
  for (const std::string& v : variants) out.variants += (out.variants.empty() ? "" : ", ") + v;
  for (auto& [name, m] : modules) {
    if (m.dora.defined()) out.tensors[name + ".dora_scale"] = m.dora;
    if (m.oft.defined()) {
      out_oft(name, m, out.tensors);
      continue;
    }
    if (m.hada[0].defined() || m.hada[1].defined() || m.hada[2].defined() || m.hada[3].defined()) {
      out_loha(name, m, out.tensors);
      continue;
    }
    if (std::any_of(std::begin(m.lokr), std::end(m.lokr),
                    [](const at::Tensor& t) { return t.defined(); })) {
      out_lokr(name, m, out.tensors);
      continue;
    }
    if (!m.down.defined() || !m.up.defined()) {
      const std::string& have = m.down.defined()    ? m.down_key
                                : m.up.defined()    ? m.up_key
                                : m.alpha.defined() ? m.alpha_key
                                : m.scale.defined() ? m.scale_key
                                                    : m.dora_key;
      throw std::runtime_error("LoRA module " + name + " is incomplete: it has '" + have +
                               "' but no " + (m.down.defined() ? "lora_up" : "lora_down") +
                               " weight");
    }
    if (m.down.dim() < 1) {
      throw std::runtime_error("LoRA key '" + m.down_key +
                               "': lora_down must have a rank dimension");
    }
    out.tensors[name + ".lora_down.weight"] = m.down;
    out.tensors[name + ".lora_up.weight"] = m.up;
    out.tensors[name + ".alpha"] =
        torch::scalar_tensor(module_alpha(m, m.down.size(0)), torch::kFloat32);
  }
  return out;
}

std::string guess_lora_family(const std::map<std::string, at::Tensor>& t) {
  bool sdxl_names = false, diffusers_names = false;
  int64_t width = 0;
  for (const auto& [key, value] : t) {
    if (starts_with(key, "lora_te1_") || starts_with(key, "lora_te2_") ||
        starts_with(key, "lora_unet_input_blocks_") ||
        starts_with(key, "lora_unet_middle_block_") ||
        starts_with(key, "lora_unet_output_blocks_") ||
        starts_with(key, "oft_unet_input_blocks_") || starts_with(key, "oft_unet_output_blocks_")) {
      sdxl_names = true;
    }
    if (starts_with(key, "lora_te_") || starts_with(key, "lora_unet_down_blocks_") ||
        starts_with(key, "oft_unet_down_blocks_") || starts_with(key, "oft_unet_up_blocks_") ||
        starts_with(key, "lora_unet_mid_block_") || starts_with(key, "lora_unet_up_blocks_")) {
      diffusers_names = true;
    }
    // Cross-attention context width, the clearest family marker.
    if (width == 0 && ends_with(key, "attn2_to_k.lora_down.weight") && value.dim() >= 2) {
      width = value.size(1);
    }
  }
  if (sdxl_names || width == 2048) return "SDXL";
  if (width == 768) return "SD 1.x";
  if (width == 1024) return "SD 2.x";
  if (diffusers_names) return "SD 1.x/2.x";
  return "";
}

}  // namespace lf
