// network.algo other than lora in real 2-rank jobs (coordinator + mpirun workers) on the tiny
// model, CPU (issue 12). The adapters' numerics are checked against their references in
// tests/core/test_oracle_oft.cpp and test_oracle_lycoris.cpp; here each trains with both ranks
// identical every step (--verify-sync-every 1), and 2 steps + --resume 2 steps give the bytes of
// 4 straight:
//  - kohya OFT (algo oft, enable_conv): only oft_unet_* oft_blocks / alpha in the file,
//    ss_network_module networks.oft, every block moved off its zero start;
//  - LyCORIS LoHa (algo loha): hada_* factors, ss_network_module lycoris.kohya;
//  - LyCORIS LoKr with DoRA (algo lokr, dora_wd): lokr_* factors and a trained dora_scale per
//    module, ss_network_args naming both.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"
#include "worker/io/tensor_file.h"

#include <torch/torch.h>

namespace {

using lf::test::expect_same_lora;
using lf::test::free_port;
using lf::test::lora_tensors;
using lf::test::RunResult;

class Adapters : public lf::test::TinyJobTest {
 protected:
  // A 4-step job (checkpoint every 2 steps) whose network section is `network`.
  std::string config(const std::string& name, const std::string& out, const std::string& network) {
    cport_ = free_port();
    const std::string path = write_config(name + ".yaml", out, 4, 2, cport_, free_port(), 0);
    std::string yaml = lf::test::read_file(path);
    const std::string tiny = "network:\n  network_dim: 4\n  network_alpha: 2.0\n";
    const auto at = yaml.find(tiny);
    EXPECT_NE(at, std::string::npos) << yaml;
    yaml.replace(at, tiny.size(), "network:\n" + network);
    std::ofstream(path) << yaml;
    return path;
  }
  RunResult run(const std::string& cfg, const std::string& flags) {
    return run_job(cfg, cport_, 2, "--verify-sync-every 1 " + flags);
  }
  // Straight 4 steps, and 2 + --resume 2: the same LoRA bytes. Returns the straight LoRA path.
  std::string expect_exact_resume(const std::string& name, const std::string& network) {
    const std::string straight = (dir_ / (name + "_straight")).string();
    RunResult a = run(config(name + "_a", straight, network), "");
    EXPECT_EQ(a.exit_code, 0) << a.output;
    const std::string split = (dir_ / (name + "_split")).string();
    const std::string cfg = config(name + "_b", split, network);
    RunResult b1 = run(cfg, "--stop-at-step 2");
    EXPECT_EQ(b1.exit_code, 0) << b1.output;
    RunResult b2 = run(cfg, "--resume " + split);
    EXPECT_EQ(b2.exit_code, 0) << b2.output;
    expect_same_lora(straight + "/e2e.safetensors", split + "/e2e.safetensors");
    return straight + "/e2e.safetensors";
  }
  int cport_ = 0;
};

TEST_F(Adapters, KohyaOFTTrainsOnTwoRanksAndResumesExactly) {
  const std::string path = expect_exact_resume(
      "oft", "  algo: oft\n  network_dim: 4\n  network_alpha: 0.01\n  enable_conv: true\n");
  const lf::LoadedTensors file = lf::load_safetensors(path, false, lf::kKeepStoredDtype);
  EXPECT_EQ(file.metadata.at("ss_network_module"), "networks.oft");
  EXPECT_EQ(file.metadata.at("ss_network_args"), "{\"enable_conv\": \"True\"}");
  // The tiny UNet: 56 attention projections + 31 ResBlock / sampler layers, a block tensor and an
  // alpha each; no text-encoder module.
  EXPECT_EQ(file.tensors.size(), 2u * (56u + 31u));
  for (const auto& [key, t] : lora_tensors(path)) {
    EXPECT_EQ(key.rfind("oft_unet_", 0), 0u) << key;
    if (key.find(".oft_blocks") == std::string::npos) continue;
    EXPECT_EQ(t.dim(), 3) << key;
    EXPECT_GT(t.abs().max().item<double>(), 0.0) << key;
  }
}

TEST_F(Adapters, LyCORISLoHaTrainsOnTwoRanksAndResumesExactly) {
  const std::string path =
      expect_exact_resume("loha", "  algo: loha\n  network_dim: 4\n  network_alpha: 2.0\n");
  const lf::LoadedTensors file = lf::load_safetensors(path, false, lf::kKeepStoredDtype);
  EXPECT_EQ(file.metadata.at("ss_network_module"), "lycoris.kohya");
  std::size_t hada = 0;
  for (const auto& kv : file.tensors) hada += kv.first.find(".hada_w2_a") != std::string::npos;
  EXPECT_GT(hada, 0u);
}

TEST_F(Adapters, LyCORISLoKrWithDoRATrainsOnTwoRanksAndResumesExactly) {
  const std::string path =
      expect_exact_resume("lokr",
                          "  algo: lokr\n  network_dim: 4\n  network_alpha: 2.0\n  factor: 4\n"
                          "  dora_wd: true\n");
  const lf::LoadedTensors file = lf::load_safetensors(path, false, lf::kKeepStoredDtype);
  EXPECT_EQ(file.metadata.at("ss_network_module"), "lycoris.kohya");
  const std::string args = file.metadata.at("ss_network_args");
  EXPECT_NE(args.find("\"algo\": \"lokr\""), std::string::npos) << args;
  EXPECT_NE(args.find("\"dora_wd\": \"True\""), std::string::npos) << args;
  std::size_t lokr = 0, dora = 0, hada = 0;
  for (const auto& kv : file.tensors) {
    lokr += kv.first.find(".lokr_w1") != std::string::npos;
    dora += kv.first.find(".dora_scale") != std::string::npos;
    hada += kv.first.find(".hada_") != std::string::npos;
  }
  EXPECT_GT(lokr, 0u);
  EXPECT_EQ(dora, lokr) << "one dora_scale per LoKr module";
  EXPECT_EQ(hada, 0u);
}

}  // namespace
