// module_identity: a pinned value, sensitivity to one ulp / dtype / shape / name, independence
// of insertion order and memory layout.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "worker/core/train/seeding.h"
#include "worker/train/model_identity.h"

namespace lf {
namespace {

std::map<std::string, at::Tensor> sample_dict() {
  auto gen = make_cpu_generator(3);
  return {{"decoder.conv.weight", torch::randn({8, 4, 3, 3}, gen)},
          {"encoder.conv_in.bias", torch::randn({8}, gen)},
          {"quant_conv.weight", torch::randn({8, 8, 1, 1}, gen)}};
}

std::map<std::string, at::Tensor> clone_dict(const std::map<std::string, at::Tensor>& d) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [k, v] : d) out.emplace(k, v.clone());
  return out;
}

TEST(ModelIdentity, PinnedValue) {
  // Python: m = "1:a\nFloat\n[2]\n" + sha256(struct.pack('<2f', 1, 2)).hexdigest() + "\n";
  //         sha256(m.encode()).hexdigest()
  EXPECT_EQ(module_identity({{"a", torch::tensor({1.0f, 2.0f})}}),
            "33e7a41a82dc264c26c9ac61e532527b43a2a9d59c7ea25763f628083ac45acc");
}

TEST(ModelIdentity, EqualForEqualDictsAndIndependentOfInsertionOrder) {
  const auto a = sample_dict();
  const auto b = clone_dict(a);
  EXPECT_EQ(module_identity(a), module_identity(b));
  EXPECT_EQ(module_identity(a).size(), 64u);
  std::map<std::string, at::Tensor> reversed;
  for (auto it = a.rbegin(); it != a.rend(); ++it) reversed.emplace(it->first, it->second.clone());
  EXPECT_EQ(module_identity(reversed), module_identity(a));
  // Memory layout does not matter: a transposed-then-contiguous-transposed view holds the same
  // row-major elements.
  auto c = clone_dict(a);
  c["quant_conv.weight"] = a.at("quant_conv.weight").transpose(0, 1).contiguous().transpose(0, 1);
  ASSERT_FALSE(c["quant_conv.weight"].is_contiguous());
  EXPECT_EQ(module_identity(c), module_identity(a));
}

TEST(ModelIdentity, DiffersWhenOneValueMovesOneUlp) {
  const auto a = sample_dict();
  auto b = clone_dict(a);
  float* p = b["encoder.conv_in.bias"].data_ptr<float>();
  p[5] = std::nextafter(p[5], INFINITY);
  EXPECT_NE(module_identity(b), module_identity(a));
}

TEST(ModelIdentity, DiffersByDtypeShapeAndName) {
  const auto a = sample_dict();
  const std::string id = module_identity(a);
  auto dtype = clone_dict(a);
  dtype["encoder.conv_in.bias"] = dtype["encoder.conv_in.bias"].to(torch::kDouble);
  EXPECT_NE(module_identity(dtype), id);
  auto shape = clone_dict(a);  // same bytes, other shape
  shape["quant_conv.weight"] = shape["quant_conv.weight"].reshape({8, 8});
  EXPECT_NE(module_identity(shape), id);
  auto renamed = clone_dict(a);
  renamed.emplace("encoder.conv_in.bias2", renamed.at("encoder.conv_in.bias"));
  renamed.erase("encoder.conv_in.bias");
  EXPECT_NE(module_identity(renamed), id);
  auto extra = clone_dict(a);
  extra.emplace("z", torch::zeros({0}));
  EXPECT_NE(module_identity(extra), id);
  EXPECT_THROW(module_identity({{"x", at::Tensor()}}), std::invalid_argument);
}

}  // namespace
}  // namespace lf
