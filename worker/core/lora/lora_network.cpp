// kohya networks.lora.LoRANetwork for the SD UNet and text encoders: target discovery, kohya key
// naming (lora_naming), kaiming/zero init and the kohya state-dict layout (loading:
// lora_network_load.cpp).
#include "lora/lora_network.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <torch/torch.h>

#include "lora/lora_blocks.h"
#include "model/attention.h"
#include "model/state_dict.h"

namespace lf {
namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// kohya's UNet module prefixes: networks.lora's and networks.oft's.
bool is_unet_module(const std::string& name) {
  return starts_with(name, "lora_unet_") || starts_with(name, "oft_unet_");
}

// kohya OFTNetwork.OFT_PREFIX_UNET: the module names of networks.lora with "oft_unet" in front.
std::string oft_module_name(const std::string& lora_name) {
  return "oft_unet_" + lora_name.substr(std::strlen("lora_unet_"));
}

// kohya networks.oft: U-Net layers only, a positive constraint factor, none of networks.lora's
// rank options.
void check_oft_options(const LoRANetworkOptions& o) {
  if (!(o.network_alpha > 0)) {
    throw std::invalid_argument(
        "LoRANetwork: OFT needs network_alpha > 0 (its constraint factor: kohya networks.oft "
        "bounds ||Q|| by alpha * out_dim, so 0 would keep every rotation the identity), got " +
        std::to_string(o.network_alpha));
  }
  if (!o.train_unet) {
    throw std::invalid_argument(
        "LoRANetwork: OFT trains the U-Net only (kohya networks.oft), and train_unet is false");
  }
  if (o.conv_dim > 0 || !o.block_dims.empty() || o.dora_wd) {
    throw std::invalid_argument("LoRANetwork: OFT takes no conv_dim, block_dims or dora_wd");
  }
}

}  // namespace

std::vector<LoRATextEncoderTarget> kohya_text_encoder_targets(const SDModels& models) {
  std::vector<LoRATextEncoderTarget> out;
  for (std::size_t i = 0; i < models.text_encoders.size(); ++i) {
    const TextEncoderSpec& spec = models.preset.text_encoders.at(i);
    // kohya builds SD 2.x's ViT-H without its last layer, so its files name 23 layers.
    const int64_t layers =
        models.preset.family == ModelFamily::kSD2 ? spec.config.num_layers - 1 : 0;
    out.push_back({models.text_encoders[i], spec.lora_prefix, layers});
  }
  return out;
}

UNetLoRANaming unet_lora_naming(UNetModel& unet, bool ldm_names) {
  UNetLoRANaming naming;
  naming.ldm_names = ldm_names;
  naming.num_res_blocks = unet->config().num_res_blocks;
  naming.level_has_attention.assign(unet->config().channel_mult.size(), false);
  const int64_t stride = naming.num_res_blocks + 1;
  for (const auto& m : unet->named_modules("", /*include_self=*/false)) {
    if (!m.value()->as<SpatialTransformerImpl>() || !starts_with(m.key(), "input_blocks.")) {
      continue;
    }
    const int64_t n = std::stoll(m.key().substr(std::strlen("input_blocks.")));
    const size_t level = static_cast<size_t>((n - 1) / stride);
    if (n >= 1 && level < naming.level_has_attention.size()) {
      naming.level_has_attention[level] = true;
    }
  }
  return naming;
}

LoRANetwork::LoRANetwork(UNetModel& unet, const UNetLoRANaming& naming,
                         const std::vector<LoRATextEncoderTarget>& text_encoders,
                         const LoRANetworkOptions& options, at::Generator& generator)
    : options_(options) {
  if (options_.network_dim <= 0) {
    throw std::invalid_argument("LoRANetwork: network_dim must be > 0, got " +
                                std::to_string(options_.network_dim));
  }
  if (options_.conv_dim < 0) {
    throw std::invalid_argument("LoRANetwork: conv_dim must be >= 0, got " +
                                std::to_string(options_.conv_dim));
  }
  if (!options_.train_unet && !options_.train_text_encoder) {
    throw std::invalid_argument(
        "LoRANetwork: nothing to train (train_unet and train_text_encoder are both false)");
  }
  const std::size_t blocks = options_.block_dims.size();
  if (options_.block_alphas.size() != blocks ||
      (!options_.conv_block_dims.empty() && options_.conv_block_dims.size() != blocks) ||
      options_.conv_block_alphas.size() != options_.conv_block_dims.size()) {
    throw std::invalid_argument(
        "LoRANetwork: block_dims, block_alphas, conv_block_dims and conv_block_alphas must have "
        "one entry per block (conv_block_* may be empty)");
  }
  const bool oft = options_.algo == LoRAAlgo::kOFT;
  if (oft) check_oft_options(options_);
  // kohya networks.oft uses alpha as given (the constraint factor); networks.lora's 0 = rank.
  if (!oft) options_.network_alpha = kohya_alpha(options_.network_alpha, options_.network_dim);
  options_.conv_alpha = kohya_alpha(options_.conv_alpha, options_.conv_dim);
  key_context_.unet = naming;
  for (const auto& te : text_encoders) key_context_.text_encoder_prefixes.push_back(te.lora_prefix);

  freeze_parameters(*unet);
  for (auto te : text_encoders) freeze_parameters(*te.model);  // a copy shares the module

  if (options_.train_unet) {
    size_t resblock_layers = 0;
    for (const auto& sub : unet->named_modules("", /*include_self=*/false)) {
      const bool lora_layer = std::dynamic_pointer_cast<LoRACompatibleLinearImpl>(sub.value()) ||
                              std::dynamic_pointer_cast<LoRAConvLayerImpl>(sub.value());
      if (!lora_layer) continue;
      const UNetLoRAName name = kohya_unet_lora_name(sub.key(), naming);
      if (name.scope == UNetLoRAScope::kNone) continue;
      if (name.scope == UNetLoRAScope::kTransformer && !oft_targets(sub.key())) continue;
      if (name.scope == UNetLoRAScope::kResBlock) {
        // kohya adds ResnetBlock2D / Downsample2D / Upsample2D to the targets only with conv_dim
        // (or conv_block_dims, or ranks read from weights).
        if (!locon_targets()) continue;
        ++resblock_layers;
      }
      add_module(oft ? oft_module_name(name.name) : name.name, sub.value(),
                 "UNet layer " + sub.key(), true);
    }
    if (options_.conv_dim > 0 && options_.block_dims.empty() && options_.module_dims.empty() &&
        resblock_layers == 0) {
      throw std::invalid_argument(
          "LoRANetwork: conv_dim " + std::to_string(options_.conv_dim) +
          " asks for LoCon, but this UNet has no LoRA-compatible ResBlock / Downsample / "
          "Upsample layer");
    }
  }
  if (options_.train_text_encoder && !oft) {  // kohya networks.oft: the U-Net only
    for (const auto& te : text_encoders) {
      for (const auto& sub : te.model->named_modules("", /*include_self=*/false)) {
        int64_t layer = 0;
        if (!is_text_encoder_lora_target(sub.key(), &layer)) continue;
        if (te.num_layers > 0 && layer >= te.num_layers) continue;
        if (!std::dynamic_pointer_cast<LoRACompatibleLinearImpl>(sub.value())) {
          throw std::invalid_argument("LoRANetwork: text-encoder layer " + sub.key() +
                                      " is not LoRA-compatible");
        }
        add_module(kohya_text_encoder_lora_name(te.lora_prefix, sub.key()), sub.value(),
                   te.lora_prefix + " layer " + sub.key(), false);
      }
    }
  }
  init_adapters(generator);
}

namespace {

// The SD 1.x/2.x UNet-only options of the short constructor.
LoRANetworkOptions unet_only_options(int64_t network_dim, double network_alpha) {
  LoRANetworkOptions o;
  o.network_dim = network_dim;
  o.network_alpha = network_alpha;
  o.train_text_encoder = false;
  return o;
}

}  // namespace

LoRANetwork::LoRANetwork(UNetModel& unet, int64_t network_dim, double network_alpha,
                         at::Generator& generator)
    : LoRANetwork(unet, unet_lora_naming(unet, /*ldm_names=*/false), {},
                  unet_only_options(network_dim, network_alpha), generator) {}

bool LoRANetwork::locon_targets() const {
  if (options_.algo == LoRAAlgo::kOFT) {
    return options_.oft_enable_conv || !options_.module_dims.empty();
  }
  return options_.conv_dim > 0 || !options_.conv_block_dims.empty() ||
         !options_.module_dims.empty();
}

bool LoRANetwork::oft_targets(const std::string& ldm_layer_path) const {
  if (options_.algo != LoRAAlgo::kOFT || options_.oft_enable_all_linear ||
      !options_.module_dims.empty()) {
    return true;
  }
  // kohya UNET_TARGET_REPLACE_MODULE_ATTN_ONLY: the children of CrossAttention (attn1 / attn2).
  return ldm_layer_path.find(".attn1.") != std::string::npos ||
         ldm_layer_path.find(".attn2.") != std::string::npos;
}

LoRAModuleDim LoRANetwork::module_dim(const std::string& name, bool unet, bool kxk) const {
  const LoRANetworkOptions& o = options_;
  const bool oft = o.algo == LoRAAlgo::kOFT;
  if (!o.module_dims.empty()) {  // kohya create_network_from_weights: the file's modules only
    auto it = o.module_dims.find(name);
    if (it == o.module_dims.end()) return {};
    if (oft) return it->second;
    return {it->second.rank, kohya_alpha(it->second.alpha, it->second.rank)};
  }
  if (oft) return {o.network_dim, o.network_alpha};  // one block count for every layer
  if (unet && !o.block_dims.empty()) {  // kohya create_network with block_dims
    const int b = kohya_block_index(name, key_context_.unet.ldm_names);
    if (b < 0 || static_cast<std::size_t>(b) >= o.block_dims.size()) {
      throw std::invalid_argument("LoRANetwork: " + name + " is in no kohya block of " +
                                  std::to_string(o.block_dims.size()));
    }
    const auto i = static_cast<std::size_t>(b);
    if (!kxk) return {o.block_dims[i], kohya_alpha(o.block_alphas[i], o.block_dims[i])};
    if (o.conv_block_dims.empty()) return {};
    return {o.conv_block_dims[i], kohya_alpha(o.conv_block_alphas[i], o.conv_block_dims[i])};
  }
  // kohya: Linear and 1x1 conv take network_dim/alpha, larger kernels conv_dim/conv_alpha.
  if (kxk) return {o.conv_dim, o.conv_alpha};
  return {o.network_dim, o.network_alpha};
}

void LoRANetwork::add_module(const std::string& name, std::shared_ptr<torch::nn::Module> layer,
                             const std::string& where, bool unet) {
  Module m;
  m.linear = std::dynamic_pointer_cast<LoRACompatibleLinearImpl>(layer);
  m.conv = std::dynamic_pointer_cast<LoRAConvLayerImpl>(layer);
  const bool busy = m.linear ? m.linear->adapter() != nullptr : m.conv->adapter() != nullptr;
  if (busy)
    throw std::invalid_argument("LoRANetwork: " + where + " already carries a LoRA adapter");
  const bool kxk = m.conv && m.conv->weight().dim() == 4 && m.conv->weight().size(2) > 1;
  const LoRAModuleDim dim = module_dim(name, unet, kxk);
  if (dim.rank <= 0) return;  // kohya skips modules of rank 0 (a block left out)
  m.rank = dim.rank;
  m.alpha = dim.alpha;
  if (!modules_.emplace(name, std::move(m)).second) {
    throw std::invalid_argument("LoRANetwork: two layers map to the kohya name " + name +
                                " (the second is " + where + ")");
  }
}

namespace {

// kohya LoRAModule's init: lora_down ([r, in] or [r, in, kh, kw]) kaiming_uniform(a = sqrt(5)),
// i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), lora_up zero.
void init_lora(LoRAAdapter& a, int64_t in, int64_t out, int64_t kh, int64_t kw, int64_t r,
               bool conv, at::Generator& generator) {
  const auto f32 = torch::dtype(torch::kFloat32);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in * kh * kw));
  a.down = torch::empty({r, in * kh * kw}, f32).uniform_(-bound, bound, generator);
  a.up = torch::zeros({out, r}, f32);
  if (conv) {
    a.down = a.down.view({r, in, kh, kw});
    a.up = a.up.view({out, r, 1, 1});
  }
}

// kohya OFTModule.__init__: oft_blocks [k, out / k, out / k] zero (R = I), constraint
// alpha * out_dim.
OFTBlocks init_oft(const std::string& name, int64_t out, int64_t k, double alpha) {
  if (out % k != 0) {
    throw std::invalid_argument("LoRANetwork: OFT network_dim " + std::to_string(k) +
                                " does not divide the " + std::to_string(out) + " outputs of " +
                                name +
                                " (kohya networks.oft splits each layer's outputs into "
                                "network_dim blocks of equal size)");
  }
  return {torch::zeros({k, out / k, out / k}, torch::dtype(torch::kFloat32)),
          alpha * static_cast<double>(out)};
}

// LyCORIS LohaModule.__init__'s init (no Tucker, no use_scalar), in its draw order.
LoHaFactors init_loha(int64_t out, int64_t fan_in, int64_t r, at::Generator& generator) {
  const auto f32 = torch::dtype(torch::kFloat32);
  LoHaFactors f;
  f.w1_b = torch::empty({r, fan_in}, f32).normal_(0.0, 1.0, generator);
  f.w1_a = torch::empty({out, r}, f32).normal_(0.0, 0.1, generator);
  f.w2_b = torch::empty({r, fan_in}, f32).normal_(0.0, 1.0, generator);
  f.w2_a = torch::zeros({out, r}, f32);
  return f;
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor*>> LoRANetwork::adapter_tensors(LoRAAdapter& a) {
  if (a.oft.defined()) return {{".oft_blocks", &a.oft.blocks}};
  if (a.loha.defined()) {
    std::vector<std::pair<std::string, torch::Tensor*>> parts = {{".hada_w1_a", &a.loha.w1_a},
                                                                 {".hada_w1_b", &a.loha.w1_b},
                                                                 {".hada_w2_a", &a.loha.w2_a},
                                                                 {".hada_w2_b", &a.loha.w2_b}};
    if (a.dora_scale.defined()) parts.emplace_back(".dora_scale", &a.dora_scale);
    return parts;
  }
  if (a.lokr.defined()) {
    std::vector<std::pair<std::string, torch::Tensor*>> parts;
    const std::pair<const char*, torch::Tensor*> all[] = {
        {".lokr_w1", &a.lokr.w1}, {".lokr_w1_a", &a.lokr.w1_a}, {".lokr_w1_b", &a.lokr.w1_b},
        {".lokr_w2", &a.lokr.w2}, {".lokr_w2_a", &a.lokr.w2_a}, {".lokr_w2_b", &a.lokr.w2_b}};
    for (const auto& [suffix, t] : all) {
      if (t->defined()) parts.emplace_back(suffix, t);
    }
    if (a.dora_scale.defined()) parts.emplace_back(".dora_scale", &a.dora_scale);
    return parts;
  }
  std::vector<std::pair<std::string, torch::Tensor*>> parts = {{".lora_down.weight", &a.down},
                                                               {".lora_up.weight", &a.up}};
  if (a.dora_scale.defined()) parts.emplace_back(".dora_scale", &a.dora_scale);
  return parts;
}

void LoRANetwork::init_adapters(at::Generator& generator) {
  torch::NoGradGuard no_grad;
  for (auto& entry : modules_) {  // sorted by name: the generator draw order
    Module& m = entry.second;
    const torch::Tensor& weight = m.linear ? m.linear->weight() : m.conv->weight();
    const int64_t in = m.linear ? m.linear->in_features() : m.conv->in_channels();
    const int64_t out = m.linear ? m.linear->out_features() : m.conv->out_channels();
    const int64_t kh = m.conv ? weight.size(2) : 1, kw = m.conv ? weight.size(3) : 1;
    auto adapter = std::make_shared<LoRAAdapter>();
    if (options_.algo == LoRAAlgo::kLoHa) {
      adapter->loha = init_loha(out, in * kh * kw, m.rank, generator);
    } else if (options_.algo == LoRAAlgo::kLoKr) {
      adapter->lokr = init_lokr(weight.sizes().vec(), m.rank, options_.lokr_factor,
                                options_.decompose_both, generator);
      if (adapter->lokr.full()) m.alpha = static_cast<double>(m.rank);  // LyCORIS: scale 1
    } else if (options_.algo == LoRAAlgo::kOFT) {
      adapter->oft = init_oft(entry.first, out, m.rank, m.alpha);
    } else {
      init_lora(*adapter, in, out, kh, kw, m.rank, m.conv != nullptr, generator);
    }
    if (options_.dora_wd) {  // LyCORIS: torch.norm(W.reshape(out, -1), dim=1) per row
      const torch::Tensor w = weight.to(torch::kFloat32).reshape({out, -1});
      std::vector<int64_t> shape(static_cast<std::size_t>(weight.dim()), 1);
      shape[0] = out;
      adapter->dora_scale = w.norm(2, {1}).reshape(shape).cpu();
    }
    for (auto& part : adapter_tensors(*adapter)) {
      *part.second = part.second->to(weight.device()).contiguous();
      part.second->set_requires_grad(true);
    }
    adapter->scale = m.alpha / static_cast<double>(m.rank);
    adapter->dropout = options_.dropout;
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
    if (!m.adapter) continue;
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
  for (const auto& entry : modules_) {
    for (const auto& part : adapter_tensors(*entry.second.adapter)) params.push_back(*part.second);
  }
  return params;
}

std::vector<torch::Tensor> LoRANetwork::unet_parameters() const {
  std::vector<torch::Tensor> params;
  for (const auto& entry : modules_) {
    if (!is_unet_module(entry.first)) continue;
    for (const auto& part : adapter_tensors(*entry.second.adapter)) params.push_back(*part.second);
  }
  return params;
}

std::vector<torch::Tensor> LoRANetwork::text_encoder_parameters() const {
  std::vector<torch::Tensor> params;
  for (const auto& entry : modules_) {
    if (is_unet_module(entry.first)) continue;
    for (const auto& part : adapter_tensors(*entry.second.adapter)) params.push_back(*part.second);
  }
  return params;
}

size_t LoRANetwork::num_text_encoder_modules() const {
  return std::count_if(modules_.begin(), modules_.end(),
                       [](const auto& entry) { return !is_unet_module(entry.first); });
}

std::vector<std::string> LoRANetwork::parameter_names() const {
  std::vector<std::string> names;
  for (const auto& entry : modules_) {
    for (const auto& part : adapter_tensors(*entry.second.adapter)) {
      names.push_back(entry.first + part.first);
    }
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

void LoRANetwork::set_dtype(at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  for (auto& entry : modules_) {
    for (auto& part : adapter_tensors(*entry.second.adapter)) {
      part.second->set_data(part.second->to(dtype));
    }
  }
}

std::map<std::string, torch::Tensor> LoRANetwork::state_dict() const {
  std::map<std::string, torch::Tensor> out;
  for (const auto& entry : modules_) {
    const Module& m = entry.second;
    for (const auto& part : adapter_tensors(*m.adapter)) {
      out[entry.first + part.first] = part.second->detach();
    }
    out[entry.first + ".alpha"] = torch::scalar_tensor(m.alpha, torch::dtype(torch::kFloat32));
  }
  return out;
}

}  // namespace lf
