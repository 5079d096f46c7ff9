// LyCORIS LoHa, LoKr and DoRA (dora_wd) against lycoris-lora (tests/oracle/make_lycoris_fixture.py,
// fixtures tests/fixtures/oracle/lycoris_{loha,lokr,dora}.safetensors): the kohya-named hada_* /
// lokr_* / alpha tensors that lycoris-lora's loader built its LohaModule / LokrModule from go
// through lorafleet's loader (normalize_lora_state_dict) onto a LoRA-compatible Linear / 1x1 conv /
// strided 3x3 conv with the same weights; the layer's forward equals the module's forward within
// 1e-5 (absolute, float32, outputs of magnitude ~1). LoKr's factor layout from init_lokr equals the
// one LokrModule built for the same options.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lora/lora_network.h"
#include "lora/lora_variants.h"
#include "model/lora_compatible.h"
#include "oracle_fixture.h"
#include "train/seeding.h"
#include "worker/io/tensor_file.h"

namespace lf {
namespace {

// The adapter normalize_lora_state_dict's output gives module `name` (scale = alpha / rank,
// alpha 0 meaning the rank, as LyCORIS LohaModule).
std::shared_ptr<LoRAAdapter> loha_adapter(const NormalizedLoRA& n, const std::string& name,
                                          double multiplier) {
  auto a = std::make_shared<LoRAAdapter>();
  a->loha = {n.tensors.at(name + ".hada_w1_a"), n.tensors.at(name + ".hada_w1_b"),
             n.tensors.at(name + ".hada_w2_a"), n.tensors.at(name + ".hada_w2_b")};
  const int64_t rank = a->loha.w1_b.size(0);
  a->scale = kohya_alpha(n.tensors.at(name + ".alpha").item<double>(), rank) / rank;
  a->multiplier = multiplier;
  return a;
}

// LoKr: the factors the file has; scale alpha / rank, 1 with both halves full (LyCORIS).
std::shared_ptr<LoRAAdapter> lokr_adapter(const NormalizedLoRA& n, const std::string& name,
                                          double multiplier) {
  auto a = std::make_shared<LoRAAdapter>();
  auto part = [&](const char* suffix) {
    auto it = n.tensors.find(name + suffix);
    return it == n.tensors.end() ? at::Tensor() : it->second;
  };
  a->lokr = {part(".lokr_w1"), part(".lokr_w1_a"), part(".lokr_w1_b"),
             part(".lokr_w2"), part(".lokr_w2_a"), part(".lokr_w2_b")};
  const int64_t rank = lokr_rank(a->lokr);
  const double alpha = kohya_alpha(n.tensors.at(name + ".alpha").item<double>(), rank);
  a->scale = a->lokr.full() ? 1.0 : alpha / rank;
  a->multiplier = multiplier;
  return a;
}

// The kohya-named tensors of fixture case `name` ("<case>.lora.<lora_name>.<part>").
std::map<std::string, at::Tensor> case_file(test::OracleFixture& fx, const std::string& name,
                                            const std::string& lora_name,
                                            const std::vector<std::string>& keys) {
  std::map<std::string, at::Tensor> file;
  const std::string prefix = name + ".lora.";
  for (const std::string& key : keys) {
    if (key.rfind(prefix, 0) == 0) file[key.substr(prefix.size())] = fx.get(key);
  }
  EXPECT_EQ(file.count(lora_name + ".alpha"), 1u);
  return file;
}

// Runs every case of `fixture` through `make_adapter` and compares with LyCORIS's output.
template <typename MakeAdapter>
void check_cases(const std::string& fixture, const std::string& variant, std::size_t n_cases,
                 MakeAdapter make_adapter) {
  test::OracleFixture fx(test::kOracleFixtureDir + fixture);
  const nlohmann::json cases = nlohmann::json::parse(fx.meta("cases"));
  ASSERT_EQ(cases.size(), n_cases);
  std::vector<std::string> keys;
  {
    const LoadedTensors all = load_safetensors(test::kOracleFixtureDir + fixture);
    for (const auto& kv : all.tensors) keys.push_back(kv.first);
  }
  torch::NoGradGuard no_grad;
  for (const auto& c : cases) {
    const std::string name = c.at("case"), lora_name = c.at("lora_name");
    SCOPED_TRACE(name);
    const auto file = case_file(fx, name, lora_name, keys);
    const NormalizedLoRA n = normalize_lora_state_dict(file, LoRAKeyContext{});
    EXPECT_NE(n.variants.find(variant), std::string::npos) << n.variants;
    ASSERT_EQ(n.tensors.size(), file.size());
    const at::Tensor& weight = fx.get(name + ".weight");
    auto adapter = make_adapter(n, lora_name, c, weight);
    const at::Tensor& x = fx.get(name + ".x");
    at::Tensor y, base;
    if (c.at("kind") == "linear") {
      LoRACompatibleLinear layer(weight.size(1), weight.size(0));
      layer->weight_mutable().copy_(weight);
      layer->named_parameters()["bias"].copy_(fx.get(name + ".bias"));
      base = layer->forward(x);
      layer->set_adapter(adapter);
      y = layer->forward(x);
    } else {
      LoRACompatibleConv layer(weight.size(1), weight.size(0), weight.size(2),
                               c.at("stride").get<int64_t>(), c.at("padding").get<int64_t>());
      layer->weight_mutable().copy_(weight);
      layer->named_parameters()["bias"].copy_(fx.get(name + ".bias"));
      base = layer->forward(x);
      layer->set_adapter(adapter);
      y = layer->forward(x);
    }
    // The update is far above the tolerance in every case (the factors are all non-zero).
    EXPECT_GT(test::max_abs_diff(base, fx.get(name + ".y")), 0.05);
    test::expect_close(fx, name + ".y", y, 1e-5);
  }
  EXPECT_TRUE(fx.unused().empty()) << fx.unused().front();
}

// DoRA (dora_wd) on a LoRA (LyCORIS LoConModule: lora_down / lora_up) or LoHa module.
std::shared_ptr<LoRAAdapter> dora_adapter(const NormalizedLoRA& n, const std::string& name,
                                          double multiplier) {
  std::shared_ptr<LoRAAdapter> a;
  if (n.tensors.count(name + ".hada_w1_a")) {
    a = loha_adapter(n, name, multiplier);
  } else {
    a = std::make_shared<LoRAAdapter>();
    a->down = n.tensors.at(name + ".lora_down.weight");
    a->up = n.tensors.at(name + ".lora_up.weight");
    const int64_t rank = a->down.size(0);
    a->scale = kohya_alpha(n.tensors.at(name + ".alpha").item<double>(), rank) / rank;
    a->multiplier = multiplier;
  }
  a->dora_scale = n.tensors.at(name + ".dora_scale");
  return a;
}

TEST(OracleLyCORIS, DoRAForwardMatchesLycorisLora) {
  check_cases("lycoris_dora.safetensors", "LyCORIS DoRA", 3,
              [](const NormalizedLoRA& n, const std::string& lora_name, const nlohmann::json& c,
                 const at::Tensor&) {
                return dora_adapter(n, lora_name, c.at("multiplier").get<double>());
              });
}

TEST(OracleLyCORIS, LoHaForwardMatchesLycorisLora) {
  check_cases("lycoris_loha.safetensors", "LyCORIS LoHa", 3,
              [](const NormalizedLoRA& n, const std::string& lora_name, const nlohmann::json& c,
                 const at::Tensor&) {
                return loha_adapter(n, lora_name, c.at("multiplier").get<double>());
              });
}

TEST(OracleLyCORIS, LoKrLayoutAndForwardMatchLycorisLora) {
  check_cases(
      "lycoris_lokr.safetensors", "LyCORIS LoKr", 5,
      [](const NormalizedLoRA& n, const std::string& lora_name, const nlohmann::json& c,
         const at::Tensor& weight) {
        auto a = lokr_adapter(n, lora_name, c.at("multiplier").get<double>());
        // lorafleet's layout for the same options: the same factors, the same shapes.
        at::Generator gen = make_cpu_generator(1);
        const LoKrFactors init =
            init_lokr(weight.sizes().vec(), c.at("rank").get<int64_t>(),
                      c.at("factor").get<int64_t>(), c.at("decompose_both").get<bool>(), gen);
        const std::pair<const at::Tensor*, const at::Tensor*> pairs[] = {
            {&init.w1, &a->lokr.w1}, {&init.w1_a, &a->lokr.w1_a}, {&init.w1_b, &a->lokr.w1_b},
            {&init.w2, &a->lokr.w2}, {&init.w2_a, &a->lokr.w2_a}, {&init.w2_b, &a->lokr.w2_b}};
        for (const auto& [mine, file] : pairs) {
          EXPECT_EQ(mine->defined(), file->defined());
          if (mine->defined() && file->defined()) {
            EXPECT_EQ(mine->sizes(), file->sizes());
          }
        }
        return a;
      });
}

}  // namespace
}  // namespace lf
