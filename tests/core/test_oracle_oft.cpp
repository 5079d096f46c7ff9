// kohya networks.oft against lycoris-lora's diag-OFT code (tests/oracle/make_oft_fixture.py,
// fixture tests/fixtures/oracle/oft.safetensors): the oft_blocks / alpha tensors of each case go
// through lorafleet's loader (normalize_lora_state_dict) onto a LoRA-compatible Linear or conv
// with the case's weights. The layer's output and d sum(y g) / d oft_blocks equal the reference's
// within 1e-5 (absolute, float32; outputs of magnitude ~1, gradients ~10), for the bound on ||Q||
// active and inactive, with and without a bias, and at multiplier 0.5.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lora/lora_variants.h"
#include "model/lora_compatible.h"
#include "oracle_fixture.h"

namespace lf {
namespace {

// The layer of one case, with the fixture's weight and bias and `adapter` attached (or none).
at::Tensor run_case(test::OracleFixture& fx, const nlohmann::json& c,
                    const std::shared_ptr<LoRAAdapter>& adapter) {
  const std::string name = c.at("case");
  const at::Tensor& weight = fx.get(name + ".weight");
  const at::Tensor& x = fx.get(name + ".x");
  torch::NoGradGuard no_grad;  // the base layer's parameters; the adapter's grad mode is its own
  if (c.at("kind") == "linear") {
    const bool bias = fx.has(name + ".bias");
    LoRACompatibleLinear layer(weight.size(1), weight.size(0), bias);
    layer->weight_mutable().copy_(weight);
    if (bias) layer->named_parameters()["bias"].copy_(fx.get(name + ".bias"));
    for (auto& p : layer->parameters()) p.set_requires_grad(false);
    layer->set_adapter(adapter);
    at::AutoGradMode grad(true);
    return layer->forward(x);
  }
  LoRACompatibleConv layer(weight.size(1), weight.size(0), weight.size(2),
                           c.at("stride").get<int64_t>(), c.at("padding").get<int64_t>());
  layer->weight_mutable().copy_(weight);
  layer->named_parameters()["bias"].copy_(fx.get(name + ".bias"));
  for (auto& p : layer->parameters()) p.set_requires_grad(false);
  layer->set_adapter(adapter);
  at::AutoGradMode grad(true);
  return layer->forward(x);
}

TEST(OracleOFT, RotatedLayerAndGradientMatchLycorisDiagOFT) {
  test::OracleFixture fx(test::kOracleFixtureDir + "oft.safetensors");
  const nlohmann::json cases = nlohmann::json::parse(fx.meta("cases"));
  ASSERT_EQ(cases.size(), 4u);
  int bounded = 0;
  for (const auto& c : cases) {
    const std::string name = c.at("case"), oft_name = c.at("oft_name");
    SCOPED_TRACE(name);
    const std::map<std::string, at::Tensor> file = {
        {oft_name + ".oft_blocks", fx.get(name + ".lora." + oft_name + ".oft_blocks")},
        {oft_name + ".alpha", fx.get(name + ".lora." + oft_name + ".alpha")}};
    const NormalizedLoRA n = normalize_lora_state_dict(file, LoRAKeyContext{});
    EXPECT_EQ(n.variants, "kohya OFT");
    ASSERT_EQ(n.tensors.size(), 2u);
    auto adapter = std::make_shared<LoRAAdapter>();
    adapter->oft.blocks = n.tensors.at(oft_name + ".oft_blocks").clone().requires_grad_(true);
    const int64_t out = fx.get(name + ".weight").size(0);
    adapter->oft.constraint = n.tensors.at(oft_name + ".alpha").item<double>() * out;
    EXPECT_NEAR(adapter->oft.constraint, c.at("constraint").get<double>(), 1e-7);
    bounded += c.at("norm_q").get<double>() > adapter->oft.constraint;
    adapter->multiplier = c.at("multiplier").get<double>();

    const at::Tensor base = run_case(fx, c, nullptr);
    const at::Tensor y = run_case(fx, c, adapter);
    // The rotation moves the output far beyond the tolerance in every case.
    EXPECT_GT(test::max_abs_diff(base, fx.get(name + ".y")), 0.01);
    test::expect_close(fx, name + ".y", y.detach(), 1e-5);
    (y * fx.get(name + ".g")).sum().backward();
    test::expect_close(fx, name + ".grad", adapter->oft.blocks.grad(), 1e-5);

    adapter->multiplier = 0.0;  // kohya: multiplier 0 runs the original forward
    EXPECT_TRUE(torch::equal(run_case(fx, c, adapter), base));
  }
  EXPECT_EQ(bounded, 2);  // attn_q and conv3 hit the bound on ||Q||, the others do not
  EXPECT_TRUE(fx.unused().empty()) << fx.unused().front();
}

}  // namespace
}  // namespace lf
