// safetensors <-> at::Tensor: the zero-copy path real checkpoints load through.
#include "worker/io/tensor_file.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>

namespace lf {
namespace {

namespace fs = std::filesystem;

class TensorFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() /
             ("lf_tensor_file_" + std::to_string(::getpid()) + ".safetensors"))
                .string();
    // fp16 and bf16 weights as SD checkpoints ship them, plus an int64 buffer.
    std::map<std::string, at::Tensor> t;
    t["a.weight"] = torch::arange(6, torch::kFloat32).reshape({2, 3}).mul(0.5).to(torch::kHalf);
    t["b.weight"] = torch::tensor({1.5f, -2.25f}).to(torch::kBFloat16);
    t["c.position_ids"] = torch::arange(4, torch::kInt64).reshape({1, 4});
    save_safetensors(path_, t, {{"format", "pt"}});
  }
  void TearDown() override { fs::remove(path_); }
  std::string path_;
};

TEST_F(TensorFileTest, KeepStoredDtypeGivesViewsInTheFilesDtypes) {
  for (const bool mmap : {true, false}) {
    SCOPED_TRACE(mmap ? "mmap" : "read");
    LoadedTensors l = load_safetensors(path_, mmap, kKeepStoredDtype);
    ASSERT_EQ(l.tensors.size(), 3u);
    EXPECT_EQ(l.metadata.at("format"), "pt");
    const at::Tensor& a = l.tensors.at("a.weight");
    EXPECT_EQ(a.scalar_type(), torch::kHalf);
    EXPECT_EQ(a.sizes(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(l.tensors.at("b.weight").scalar_type(), torch::kBFloat16);
    EXPECT_EQ(l.tensors.at("c.position_ids").scalar_type(), torch::kInt64);
    // The mapping outlives the loader: copy into a float32 parameter as load_state_dict does.
    at::Tensor param = torch::empty({2, 3});
    param.copy_(a);
    EXPECT_TRUE(torch::equal(param, torch::arange(6, torch::kFloat32).reshape({2, 3}).mul(0.5)));
    EXPECT_FLOAT_EQ(l.tensors.at("b.weight")[1].item<float>(), -2.25f);
  }
}

TEST_F(TensorFileTest, FloatDtypeConvertsFloatingTensorsOnly) {
  LoadedTensors l = load_safetensors(path_, true, torch::kFloat32);
  EXPECT_EQ(l.tensors.at("a.weight").scalar_type(), torch::kFloat32);
  EXPECT_EQ(l.tensors.at("b.weight").scalar_type(), torch::kFloat32);
  EXPECT_EQ(l.tensors.at("c.position_ids").scalar_type(), torch::kInt64);
  EXPECT_FLOAT_EQ(l.tensors.at("a.weight")[1][2].item<float>(), 2.5f);
}

}  // namespace
}  // namespace lf
