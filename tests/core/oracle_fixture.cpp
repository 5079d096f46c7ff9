// Oracle fixture access for the C++ parity tests (see header).
#include "oracle_fixture.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "common/io/sha256.h"
#include "worker/app/make_checkpoint.h"

namespace lf::test {

const std::string kOracleFixtureDir = LF_SOURCE_DIR "/tests/fixtures/oracle/";

OracleFixture::OracleFixture(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error(path + " missing: run tests/oracle/regen.sh");
  }
  loaded_ = load_safetensors(path);
}

const at::Tensor& OracleFixture::get(const std::string& key) {
  auto it = loaded_.tensors.find(key);
  if (it == loaded_.tensors.end()) throw std::runtime_error("fixture lacks " + key);
  used_.insert(key);
  return it->second;
}

std::string OracleFixture::meta(const std::string& key) const {
  auto it = loaded_.metadata.find(key);
  return it == loaded_.metadata.end() ? "" : it->second;
}

std::vector<std::string> OracleFixture::unused() const {
  std::vector<std::string> out;
  for (const auto& kv : loaded_.tensors) {
    if (!used_.count(kv.first)) out.push_back(kv.first);
  }
  std::sort(out.begin(), out.end());
  return out;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

void expect_close(OracleFixture& fx, const std::string& key, const at::Tensor& got, double atol) {
  const at::Tensor& want = fx.get(key);
  ASSERT_EQ(got.sizes(), want.sizes()) << key;
  const double diff = max_abs_diff(got, want);
  std::printf("  %-18s max|diff| %.3g (max|ref| %.3g)\n", key.c_str(), diff,
              want.abs().max().item<double>());
  EXPECT_LE(diff, atol) << key << ": lorafleet differs from the reference";
}

std::string random_checkpoint_sha256(const std::string& preset,
                                     const std::unordered_map<std::string, at::Tensor>& weights,
                                     uint64_t seed) {
  const std::map<std::string, at::Tensor> ordered(weights.begin(), weights.end());
  const std::vector<std::uint8_t> bytes =
      serialize_safetensors(ordered, random_checkpoint_metadata(preset, seed));
  return sha256_hex(bytes.data(), bytes.size());
}

}  // namespace lf::test
