// kohya's optimizer_type in real 2-rank jobs (coordinator + mpirun workers) on the tiny model,
// CPU (issue 12). The algorithms themselves are checked against their PyPI references in
// tests/core/test_oracle_optimizer.cpp; here:
//  - Prodigy and AdamWScheduleFree keep both ranks identical every step, and 2 steps +
//    --resume 2 steps give the bytes of 4 straight (their state, d and schedule-free's z and
//    weight sums, is in the checkpoint; schedule-free saves its evaluation weights x and
//    resumes from them);
//  - a Prodigy checkpoint of 2 ranks resumes on 1 rank, and with AdamW is refused (exit 3);
//  - the optimizers change the LoRA (the AdamW run differs from both);
//  - AdamW8bit is refused with its reason, before any worker trains.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"

#include <torch/torch.h>

namespace fs = std::filesystem;

namespace {

using lf::test::expect_same_lora;
using lf::test::free_port;
using lf::test::lora_tensors;
using lf::test::RunResult;

class Optimizers : public lf::test::TinyJobTest {
 protected:
  // A 4-step job (checkpoint every 2 steps) with `training` keys added, its config path.
  std::string config(const std::string& name, const std::string& out, const std::string& training) {
    cport_ = free_port();
    const std::string path =
        write_config(name + ".yaml", out, 4, 2, cport_, free_port(), 0, "", "", training);
    // The keys `training` sets replace the tiny job's own lines.
    std::string yaml = lf::test::read_file(path);
    for (const char* key : {"learning_rate", "lr_scheduler", "lr_warmup_steps"}) {
      const std::string line = std::string("  ") + key + ":";
      if (training.find(line) == std::string::npos) continue;
      const auto at = yaml.find(line);
      yaml.erase(at, yaml.find('\n', at) - at + 1);
    }
    std::ofstream(path) << yaml;
    return path;
  }
  RunResult run(const std::string& cfg, int np, const std::string& flags) {
    return run_job(cfg, cport_, np, "--verify-sync-every 1 " + flags);
  }
  // Straight 4 steps, and 2 + --resume 2: the same LoRA bytes. Returns the straight LoRA path.
  std::string expect_exact_resume(const std::string& name, const std::string& training) {
    const std::string straight = (dir_ / (name + "_straight")).string();
    RunResult a = run(config(name + "_a", straight, training), 2, "");
    EXPECT_EQ(a.exit_code, 0) << a.output;
    const std::string split = (dir_ / (name + "_split")).string();
    const std::string cfg = config(name + "_b", split, training);
    RunResult b1 = run(cfg, 2, "--stop-at-step 2");
    EXPECT_EQ(b1.exit_code, 0) << b1.output;
    RunResult b2 = run(cfg, 2, "--resume " + split);
    EXPECT_EQ(b2.exit_code, 0) << b2.output;
    expect_same_lora(straight + "/e2e.safetensors", split + "/e2e.safetensors");
    return straight + "/e2e.safetensors";
  }

  int cport_ = 0;
};

bool same_tensors(const std::string& a_path, const std::string& b_path) {
  const auto a = lora_tensors(a_path), b = lora_tensors(b_path);
  for (const auto& [key, t] : a) {
    if (!b.count(key) || !at::equal(t, b.at(key))) return false;
  }
  return a.size() == b.size();
}

TEST_F(Optimizers, ProdigyAndScheduleFreeResumeExactlyAndProdigyOnAnotherWorldSize) {
  const std::string prodigy = expect_exact_resume(
      "prodigy",
      "  learning_rate: 1.0\n  optimizer_type: prodigy\n"
      "  optimizer_args: [\"d_coef=2\", \"weight_decay=0.01\", \"use_bias_correction=True\", "
      "\"safeguard_warmup=True\"]\n");
  const std::string schedule_free =
      expect_exact_resume("sf",
                          "  learning_rate: 0.001\n  lr_scheduler: constant\n  lr_warmup_steps: 0\n"
                          "  optimizer_type: AdamWScheduleFree\n"
                          "  optimizer_args: [\"warmup_steps=2\", \"weight_decay=0.01\"]\n");

  // Prodigy's state (the same on every rank) continues on 1 rank.
  const std::string split = (dir_ / "prodigy_split").string();
  const std::string one = (dir_ / "prodigy_one").string();
  fs::remove_all(one);
  fs::create_directories(one);
  fs::copy(split + "/checkpoints", one + "/checkpoints", fs::copy_options::recursive);
  // Drop the checkpoints after step 2 so the resume starts there.
  for (const auto& e : fs::directory_iterator(one + "/checkpoints")) {
    if (e.path().filename().string().find("00000002") == std::string::npos) fs::remove_all(e);
  }
  // Resuming it with another optimizer_type is refused as bad input (exit 3) before the model
  // loads, naming the key, and leaves the checkpoints as they were.
  const std::string other = (dir_ / "prodigy_as_adamw").string();
  fs::remove_all(other);
  fs::copy(one, other, fs::copy_options::recursive);
  RunResult refused =
      run(config("prodigy_as_adamw", other, "  learning_rate: 0.001\n"), 1, "--resume " + other);
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_NE(refused.output.find("key 'training.optimizer_type': the checkpoint was trained "
                                "with Prodigy, the job has AdamW"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(refused.output.find(" modules ("), std::string::npos)
      << "refused before the model and the network are built";
  std::size_t kept = 0;
  for (const auto& e : fs::directory_iterator(other + "/checkpoints")) kept += e.is_directory();
  EXPECT_EQ(kept, 1u);
  EXPECT_FALSE(fs::exists(other + "/e2e.safetensors"));

  RunResult c = run(config("prodigy_one", one,
                           "  learning_rate: 1.0\n  optimizer_type: Prodigy\n"
                           "  optimizer_args: [\"d_coef=2\", \"weight_decay=0.01\", "
                           "\"use_bias_correction=True\", \"safeguard_warmup=True\"]\n"),
                    1, "--resume " + one);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from"), std::string::npos) << c.output;
  EXPECT_TRUE(fs::exists(one + "/e2e.safetensors"));

  const std::string adamw = (dir_ / "adamw").string();
  RunResult d = run(config("adamw", adamw, "  learning_rate: 0.001\n"), 2, "");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_FALSE(same_tensors(adamw + "/e2e.safetensors", prodigy));
  EXPECT_FALSE(same_tensors(adamw + "/e2e.safetensors", schedule_free));
}

TEST_F(Optimizers, AdamW8bitIsRefusedWithItsReason) {
  const std::string out = (dir_ / "bnb").string();
  const std::string cfg = config("bnb", out, "  optimizer_type: AdamW8bit\n");
  RunResult r = lf::test::run(std::string(LF_COORDINATOR_BIN) + " --config " + cfg + " --inspect");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("key 'training.optimizer_type': 'AdamW8bit': bitsandbytes' 8-bit"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("use optimizer_type AdamW"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/e2e.safetensors"));
}

}  // namespace
