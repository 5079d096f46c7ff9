// LyCORIS LoHa against lycoris-lora (tests/oracle/make_lycoris_fixture.py, fixture
// tests/fixtures/oracle/lycoris_loha.safetensors): the kohya-named hada_* / alpha tensors that
// lycoris-lora's loader built its LohaModule from go through lorafleet's loader
// (normalize_lora_state_dict) onto a LoRA-compatible Linear / 1x1 conv / strided 3x3 conv with
// the same weights; the layer's forward equals LohaModule.forward within 1e-5 (absolute, float32,
// outputs of magnitude ~1).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lora/lora_network.h"
#include "lora/lora_variants.h"
#include "model/lora_compatible.h"
#include "oracle_fixture.h"

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

TEST(OracleLyCORIS, LoHaForwardMatchesLycorisLora) {
  test::OracleFixture fx(test::kOracleFixtureDir + "lycoris_loha.safetensors");
  const nlohmann::json cases = nlohmann::json::parse(fx.meta("cases"));
  ASSERT_EQ(cases.size(), 3u);
  torch::NoGradGuard no_grad;
  for (const auto& c : cases) {
    const std::string name = c.at("case"), lora_name = c.at("lora_name");
    SCOPED_TRACE(name);
    std::map<std::string, at::Tensor> file;
    for (const char* part : {".hada_w1_a", ".hada_w1_b", ".hada_w2_a", ".hada_w2_b", ".alpha"}) {
      file[lora_name + part] = fx.get(name + ".lora." + lora_name + part);
    }
    const NormalizedLoRA n = normalize_lora_state_dict(file, LoRAKeyContext{});
    EXPECT_EQ(n.variants, "LyCORIS LoHa");
    ASSERT_EQ(n.tensors.size(), 5u);
    auto adapter = loha_adapter(n, lora_name, c.at("multiplier").get<double>());
    const at::Tensor& weight = fx.get(name + ".weight");
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
    // The LoHa update is far above the tolerance in every case (the factors are all non-zero).
    EXPECT_GT(test::max_abs_diff(base, fx.get(name + ".y")), 0.1);
    test::expect_close(fx, name + ".y", y, 1e-5);
  }
  EXPECT_TRUE(fx.unused().empty()) << fx.unused().front();
}

}  // namespace
}  // namespace lf
