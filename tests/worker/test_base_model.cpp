// Loading the user's base checkpoint: family detection with architecture auto, a named preset
// checked against the file, fp16 files and mmap off, and errors that start with the file's path.
#include "worker/train/base_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "worker/core/model/checkpoint.h"
#include "worker/io/tensor_file.h"

namespace lf {
namespace {

namespace fs = std::filesystem;

class BaseModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lf_base_model_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes make_random_checkpoint(preset, 3) in `dtype`, minus keys containing `drop`.
  std::string write(const std::string& preset, at::ScalarType dtype = at::kFloat,
                    const std::string& drop = "") {
    auto w = make_random_checkpoint(model_preset(preset), 3, dtype);
    std::map<std::string, at::Tensor> kept;
    for (auto& kv : w) {
      if (drop.empty() || kv.first.find(drop) == std::string::npos) kept.emplace(kv);
    }
    const std::string path = (dir_ / (preset + std::to_string(kept.size()) + ".safetensors"));
    save_safetensors(path, kept, {});
    return path;
  }

  static std::string error_of(const ModelSection& m) {
    try {
      load_base_model(m);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

// The dtypes of every parameter of `m`.
std::set<at::ScalarType> dtypes_in(const torch::nn::Module& m) {
  std::set<at::ScalarType> out;
  for (const auto& p : m.parameters()) out.insert(p.scalar_type());
  return out;
}

TEST_F(BaseModelTest, BuildsEachPartInItsMixedPrecisionDtype) {
  ModelSection m;
  m.pretrained_model_name_or_path = write("tiny-sdxl", at::kHalf);  // an fp16 file
  SDModelDtypes dtypes;
  dtypes.unet = dtypes.text_encoders = at::kBFloat16;  // kohya weight_dtype
  const BaseModel b = load_base_model(m, dtypes);
  EXPECT_EQ(dtypes_in(*b.models.unet), std::set<at::ScalarType>{at::kBFloat16});
  ASSERT_EQ(b.models.text_encoders.size(), 2u);
  for (const auto& te : b.models.text_encoders) {
    EXPECT_EQ(dtypes_in(*te), std::set<at::ScalarType>{at::kBFloat16});
  }
  EXPECT_EQ(dtypes_in(*b.models.vae_encoder), std::set<at::ScalarType>{at::kFloat});
  // The values are the file's, rounded once to bf16.
  const LoadedTensors file = load_safetensors(m.pretrained_model_name_or_path);
  const at::Tensor& w = file.tensors.at("model.diffusion_model.out.2.weight");
  const auto params = b.models.unet->named_parameters();
  EXPECT_TRUE(torch::equal(params["out.2.weight"], w.to(at::kBFloat16)));
}

TEST_F(BaseModelTest, AutoDetectsEachFamilyAndItsTinyPreset) {
  for (const std::string preset : {"tiny", "tiny-sd2", "tiny-sdxl"}) {
    ModelSection m;
    m.pretrained_model_name_or_path = write(preset);
    const BaseModel b = load_base_model(m);
    EXPECT_EQ(b.models.preset.name, preset);
    EXPECT_EQ(b.models.text_encoders.size(), preset == "tiny-sdxl" ? 2u : 1u);
    EXPECT_FALSE(b.models.vae_decoder) << "training never decodes";
    EXPECT_NE(b.summary.find("(preset " + preset + ")"), std::string::npos) << b.summary;
  }
}

TEST_F(BaseModelTest, Fp16FileWithAndWithoutMmapGivesTheSameFp32Weights) {
  ModelSection m;
  m.pretrained_model_name_or_path = write("tiny-sdxl", at::kHalf);
  const BaseModel mapped = load_base_model(m);
  m.disable_mmap_load_safetensors = true;
  const BaseModel read = load_base_model(m);
  auto a = mapped.models.unet->named_parameters();
  auto b = read.models.unet->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& kv : a) {
    EXPECT_EQ(kv.value().scalar_type(), at::kFloat) << kv.key();
    EXPECT_TRUE(torch::equal(kv.value(), b[kv.key()])) << kv.key();
  }
  // fp16 -> fp32 is exact: the parameter holds the file's values.
  const auto file = load_safetensors(m.pretrained_model_name_or_path, true, kKeepStoredDtype);
  EXPECT_TRUE(torch::equal(a["out.2.weight"],
                           file.tensors.at("model.diffusion_model.out.2.weight").to(at::kFloat)));
}

TEST_F(BaseModelTest, ErrorsStartWithThePathAndSayWhatWasExpected) {
  ModelSection m;
  m.pretrained_model_name_or_path = write("tiny-sdxl");
  m.architecture = "tiny";
  const std::string wrong = error_of(m);
  EXPECT_EQ(wrong.rfind(m.pretrained_model_name_or_path + ": ", 0), 0u) << wrong;
  EXPECT_NE(wrong.find("model.architecture 'tiny' is a sd1 preset, but the checkpoint's keys and "
                       "shapes are sdxl's (use architecture: auto)"),
            std::string::npos)
      << wrong;

  m.architecture = "auto";
  m.pretrained_model_name_or_path = write("tiny", at::kFloat, "input_blocks.1.1.proj_in");
  const std::string missing = error_of(m);
  EXPECT_EQ(missing.rfind(m.pretrained_model_name_or_path + ": ", 0), 0u) << missing;
  EXPECT_NE(missing.find("model.diffusion_model.input_blocks.1.1.proj_in.weight"),
            std::string::npos)
      << missing;

  const std::string ckpt = (dir_ / "model.ckpt").string();
  std::ofstream(ckpt, std::ios::binary) << std::string("\x80\x02}q\x00.", 6);
  m.pretrained_model_name_or_path = ckpt;
  const std::string pickle = error_of(m);
  EXPECT_EQ(pickle.rfind(ckpt + ": ", 0), 0u) << pickle;
  EXPECT_NE(pickle.find("convert it to .safetensors"), std::string::npos) << pickle;
}

}  // namespace
}  // namespace lf
