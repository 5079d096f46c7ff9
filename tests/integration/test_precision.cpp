// Mixed precision, fp16 loss scaling, gradient checkpointing, fp8_base and save_precision in
// real 2-rank jobs (coordinator + mpirun workers) on the tiny model, CPU:
//  - bf16: the frozen weights are bf16 (the worker logs their dtypes, read from the tensors),
//    both ranks hold identical LoRA weights after every step, N + --resume N gives the bytes of
//    2N straight, and two identical runs give identical bytes;
//  - fp16: an Inf injected into rank 1's gradient at step 3 (LF_TEST_INJECT_INF_GRAD) skips the
//    step on both ranks (the LoRA after step 3 is the LoRA after step 2), the scale goes
//    65536 -> 32768 in the checkpoint and the metrics, and a resume after it continues exactly;
//    without loss scaling (bf16) an Inf gradient stops the run at the next loss, naming the step;
//  - full_fp16 / full_bf16 train a half LoRA with finite losses and float32 AdamW moments, and
//    write it half (save_precision unset, as kohya);
//  - gradient checkpointing on or off ends with the same LoRA bytes (tiny SD 1.x and SDXL);
//  - save_precision fp16 / bf16 writes F16 / BF16 tensors with exact float32 alphas, while the
//    checkpoint keeps the training dtype;
//  - fp8_base stores the UNet's matrices as float8 and its losses stay within 2% of bf16's;
//  - bad input fails with one line naming the key.
// fp16 on the CPU is refused unless LF_ALLOW_CPU_FP16=1, which these tests set to reach it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/checkpoint/train_position.h"
#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"
#include "worker/io/tensor_file.h"

#include <torch/torch.h>

namespace fs = std::filesystem;

namespace {

using lf::test::expect_same_lora;
using lf::test::free_port;
using lf::test::lora_tensors;
using lf::test::read_file;
using lf::test::RunResult;

const std::string kCpuFp16 = "LF_ALLOW_CPU_FP16=1";

class Precision : public lf::test::TinyJobTest {
 protected:
  // Runs a 2-rank job with `training` keys added; every step's digests and losses are logged.
  RunResult train(const std::string& name, const std::string& out, int steps,
                  const std::string& training, const std::string& flags = "",
                  const std::string& env = kCpuFp16, int save_every = 0,
                  const std::string& extra = "") {
    const int cport = free_port();
    const std::string cfg = write_config(name + ".yaml", out, steps, save_every, cport,
                                         free_port(), 0, extra, "", training);
    return run_job(cfg, cport, 2, "--verify-sync-every 1 " + flags, nullptr, env);
  }
};

struct StepLog {
  std::map<int, std::map<int, std::string>> digest;  // step -> rank -> LoRA sha256
  std::map<int, double> loss;                        // step -> rank 0's loss
};

StepLog parse_steps(const std::string& output) {
  StepLog log;
  const std::regex re(
      R"(\[rank (\d) INFO\] sync check global_step (\d+) loss (\S+) lora_sha256 ([0-9a-f]{64}))");
  for (std::sregex_iterator it(output.begin(), output.end(), re), end; it != end; ++it) {
    const int rank = std::stoi((*it)[1]), step = std::stoi((*it)[2]);
    log.digest[step][rank] = (*it)[4];
    if (rank == 0) log.loss[step] = std::stod((*it)[3]);
  }
  return log;
}

void expect_ranks_in_sync(const StepLog& log, int steps) {
  ASSERT_EQ(log.digest.size(), static_cast<std::size_t>(steps));
  for (const auto& [step, per_rank] : log.digest) {
    ASSERT_EQ(per_rank.size(), 2u) << "step " << step;
    EXPECT_EQ(per_rank.at(0), per_rank.at(1)) << "ranks diverged at step " << step;
  }
}

TEST_F(Precision, Bf16RanksInSyncResumeAndReruns) {
  const std::string bf16 = "  mixed_precision: bf16\n";
  const std::string a = (dir_ / "a").string(), b = (dir_ / "b").string();
  const RunResult ra = train("a", a, 6, bf16);
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  EXPECT_NE(ra.output.find("frozen weights: UNet bf16, text encoders bf16, VAE fp32"),
            std::string::npos)
      << ra.output;
  const StepLog log = parse_steps(ra.output);
  expect_ranks_in_sync(log, 6);
  EXPECT_NE(log.digest.at(1).at(0), log.digest.at(6).at(0)) << "the LoRA did not train";
  for (const auto& [step, loss] : log.loss) EXPECT_TRUE(std::isfinite(loss)) << step;

  const RunResult again = train("again", (dir_ / "again").string(), 6, bf16);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_same_lora(a + "/e2e.safetensors", dir_ / "again/e2e.safetensors");

  const RunResult b1 = train("b", b, 6, bf16, "--stop-at-step 3");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  const RunResult b2 = train("b", b, 6, bf16, "--resume " + b);
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  EXPECT_NE(b2.output.find("resumed from"), std::string::npos) << b2.output;
  expect_same_lora(a + "/e2e.safetensors", b + "/e2e.safetensors");
  expect_same_lora(a + "/checkpoints/step-00000006/lora.safetensors",
                   b + "/checkpoints/step-00000006/lora.safetensors");
}

TEST_F(Precision, Fp16InfOnOneRankSkipsTheStepOnBothAndResumesExactly) {
  const std::string fp16 = "  mixed_precision: fp16\n";
  const std::string inject = kCpuFp16 + " LF_TEST_INJECT_INF_GRAD=1:3";
  const std::string a = (dir_ / "a").string(), b = (dir_ / "b").string();
  const RunResult ra = train("a", a, 6, fp16, "", inject, /*save_every=*/1);
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  const StepLog log = parse_steps(ra.output);
  expect_ranks_in_sync(log, 6);
  // Step 3 changed nothing on either rank; the steps around it did.
  EXPECT_EQ(log.digest.at(3).at(0), log.digest.at(2).at(0));
  EXPECT_NE(log.digest.at(2).at(0), log.digest.at(1).at(0));
  EXPECT_NE(log.digest.at(4).at(0), log.digest.at(3).at(0));
  EXPECT_NE(ra.output.find("global_step 3 skipped (Inf/NaN gradients on 1 rank(s)); scale 65536 "
                           "-> 32768, 1 skipped so far"),
            std::string::npos)
      << ra.output;
  EXPECT_EQ(ra.output.find("global_step 4 skipped"), std::string::npos) << ra.output;
  expect_same_lora(a + "/checkpoints/step-00000002/lora.safetensors",
                   a + "/checkpoints/step-00000003/lora.safetensors");
  const lf::TrainPosition at2 = lf::read_train_position(a + "/checkpoints/step-00000002");
  const lf::TrainPosition at3 = lf::read_train_position(a + "/checkpoints/step-00000003");
  EXPECT_EQ(at2.loss_scale, 65536.0);
  EXPECT_EQ(at2.skipped_steps, 0);
  EXPECT_EQ(at3.loss_scale, 32768.0);
  EXPECT_EQ(at3.loss_scale_growth_tracker, 0);
  EXPECT_EQ(at3.skipped_steps, 1);
  EXPECT_EQ(lf::read_train_position(a + "/checkpoints/step-00000006").loss_scale_growth_tracker,
            3);
  const std::string metrics = read_file(a + "/metrics/worker_rank1.prom");
  EXPECT_NE(metrics.find("lorafleet_worker_skipped_steps_total{rank=\"1\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("lorafleet_worker_loss_scale{rank=\"1\"} 32768"), std::string::npos);

  // Stop after the skipped step, resume: the same bytes as straight through.
  const RunResult b1 = train("b", b, 6, fp16, "--stop-at-step 4", inject, 1);
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  const RunResult b2 = train("b", b, 6, fp16, "--resume " + b, inject, 1);
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  expect_same_lora(a + "/e2e.safetensors", b + "/e2e.safetensors");
  expect_same_lora(a + "/checkpoints/step-00000006/lora.safetensors",
                   b + "/checkpoints/step-00000006/lora.safetensors");
}

TEST_F(Precision, PrecisionMayChangeOnResume) {
  // bf16 for 3 steps, then fp16 from that checkpoint (kohya allows it): the run continues with a
  // fresh loss scale, and its later steps train.
  const std::string out = (dir_ / "change").string();
  const RunResult b1 = train("bf16", out, 6, "  mixed_precision: bf16\n", "--stop-at-step 3");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  const RunResult b2 = train("fp16", out, 6, "  mixed_precision: fp16\n", "--resume " + out);
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  EXPECT_NE(b2.output.find("resumed from"), std::string::npos) << b2.output;
  const StepLog log = parse_steps(b2.output);
  ASSERT_EQ(log.digest.size(), 3u);
  ASSERT_TRUE(log.digest.count(6));
  for (const auto& [step, loss] : log.loss) EXPECT_TRUE(std::isfinite(loss)) << step;
  const lf::TrainPosition at6 = lf::read_train_position(out + "/checkpoints/step-00000006");
  EXPECT_EQ(at6.loss_scale, 65536.0);
  EXPECT_EQ(at6.loss_scale_growth_tracker, 3);
}

TEST_F(Precision, Bf16InfGradientStopsTheRunAtTheNextLoss) {
  // Without fp16 loss scaling nothing skips a step: an Inf gradient at step 2 makes the LoRA NaN
  // (clipping multiplies it by 0), and step 3's loss stops the run naming that step, with exit 3
  // (a restart would meet the same loss).
  const RunResult r = train("inf", (dir_ / "inf").string(), 6, "  mixed_precision: bf16\n", "",
                            "LF_TEST_INJECT_INF_GRAD=1:2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find((dir_ / "inf.yaml").string() +
                          ": loss is NaN at global_step 3 (try a lower training.learning_rate) "
                          "(exit 3)"),
            std::string::npos)
      << r.output;
  const StepLog log = parse_steps(r.output);
  EXPECT_EQ(log.digest.count(3), 0u) << "step 3 completed";
  EXPECT_TRUE(std::isfinite(log.loss.at(2)));
}

TEST_F(Precision, FullHalfTrainsHalfLoRAWithFloat32OptimizerState) {
  // full_fp16 / full_bf16 make the LoRA itself half; AdamW steps float32 copies of it (in half
  // its eps underflows and a zero gradient gives 0/0), so the losses stay finite and the
  // checkpoint's moments are float32 while its LoRA is half.
  for (const auto& [mode, dtype] :
       std::map<std::string, at::ScalarType>{{"fp16", at::kHalf}, {"bf16", at::kBFloat16}}) {
    const std::string out = (dir_ / mode).string();
    const RunResult r = train(mode, out, 4,
                              "  mixed_precision: " + mode + "\n  full_" + mode + ": true\n", "",
                              kCpuFp16, /*save_every=*/4);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const StepLog log = parse_steps(r.output);
    expect_ranks_in_sync(log, 4);
    for (const auto& [step, loss] : log.loss) EXPECT_TRUE(std::isfinite(loss)) << mode << step;
    EXPECT_NE(log.digest.at(1).at(0), log.digest.at(4).at(0)) << mode << ": the LoRA did not train";
    const std::string ckpt = out + "/checkpoints/step-00000004";
    const auto lora = lora_tensors(ckpt + "/lora.safetensors");
    ASSERT_EQ(lora.size(), 3u * (84u + 12u));
    for (const auto& [name, t] : lora) {
      const bool alpha = name.size() > 6 && name.compare(name.size() - 6, 6, ".alpha") == 0;
      EXPECT_EQ(t.scalar_type(), alpha ? at::kFloat : dtype) << mode << " " << name;
      if (!alpha) {
        EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << mode << " " << name;
      }
    }
    int moments = 0;
    for (const auto& [name, t] : lora_tensors(ckpt + "/" + lf::kCheckpointStateFile)) {
      if (name.find(".exp_avg") == std::string::npos) continue;
      ++moments;
      EXPECT_EQ(t.scalar_type(), at::kFloat) << mode << " " << name;
    }
    EXPECT_EQ(moments, 2 * 2 * (84 + 12)) << mode;
    // save_precision unset (kohya's None): the user's file is in the training dtype too.
    for (const auto& [name, t] : lora_tensors(out + "/e2e.safetensors")) {
      const bool alpha = name.size() > 6 && name.compare(name.size() - 6, 6, ".alpha") == 0;
      EXPECT_EQ(t.scalar_type(), alpha ? at::kFloat : dtype) << mode << " e2e " << name;
    }  // exp_avg(_sq) of each lora_down, lora_up
  }
}

TEST_F(Precision, GradientCheckpointingAndDeterministicModeEndWithTheSameLoRABytes) {
  const std::string ckpt = "  gradient_checkpointing: true\n";
  const RunResult off = train("off", (dir_ / "off").string(), 4, "");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  const RunResult on = train("on", (dir_ / "on").string(), 4, ckpt);
  ASSERT_EQ(on.exit_code, 0) << on.output;
  EXPECT_NE(on.output.find("gradient checkpointing: 15 UNet blocks"), std::string::npos)
      << on.output;
  EXPECT_NE(on.output.find("gradient checkpointing: 2 text-encoder layers"), std::string::npos);
  expect_ranks_in_sync(parse_steps(on.output), 4);
  expect_same_lora(dir_ / "off/e2e.safetensors", dir_ / "on/e2e.safetensors");
  // training.deterministic changes nothing on the CPU, whose kernels are deterministic anyway.
  const RunResult det = train("det", (dir_ / "det").string(), 4, "  deterministic: true\n");
  ASSERT_EQ(det.exit_code, 0) << det.output;
  expect_same_lora(dir_ / "off/e2e.safetensors", dir_ / "det/e2e.safetensors");
  EXPECT_EQ(lora_tensors(dir_ / "on/e2e.safetensors").size(), 3u * (84u + 12u));

  // The SDXL-like model: two text encoders, vector conditioning, ldm block names.
  const std::string sdxl_base = (dir_ / "sdxl.safetensors").string();
  const RunResult mk = lf::test::run(std::string(LF_MAKE_CHECKPOINT_BIN) +
                                     " --preset tiny-sdxl --seed 7 --output " + sdxl_base);
  ASSERT_EQ(mk.exit_code, 0) << mk.output;
  for (const char* name : {"xl_off", "xl_on"}) {
    const int cport = free_port();
    std::string cfg = write_config(std::string(name) + ".yaml", (dir_ / name).string(), 3, 0,
                                   cport, free_port(), 0, "", "",
                                   std::string(name) == "xl_on" ? ckpt : "");
    std::string y = read_file(cfg);
    y.replace(y.find(checkpoint_), checkpoint_.size(), sdxl_base);
    y.replace(y.find("architecture: tiny\n"), 19, "architecture: tiny-sdxl\n");
    std::ofstream(cfg) << y;
    const RunResult r = run_job(cfg, cport, 2, "--verify-sync-every 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  expect_same_lora(dir_ / "xl_off/e2e.safetensors", dir_ / "xl_on/e2e.safetensors");
}

TEST_F(Precision, SavePrecisionWritesHalfTensorsWithExactAlphas) {
  for (const auto& [precision, dtype] :
       std::map<std::string, at::ScalarType>{{"fp16", at::kHalf}, {"bf16", at::kBFloat16}}) {
    const std::string out = (dir_ / precision).string();
    const int cport = free_port();
    std::string cfg = write_config(precision + ".yaml", out, 2, 0, cport, free_port(), 0);
    std::string y = read_file(cfg);
    y.replace(y.find("  output_name: e2e\n"), 18,
              "  output_name: e2e\n  save_precision: " + precision + "\n");
    std::ofstream(cfg) << y;
    const RunResult r = run_job(cfg, cport, 2, "");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The checkpoint keeps the training dtype (what a resume continues from) ...
    const auto full = lora_tensors(out + "/checkpoints/step-00000002/lora.safetensors");
    const auto saved = lora_tensors(out + "/e2e.safetensors");
    ASSERT_EQ(full.size(), saved.size());
    ASSERT_EQ(saved.size(), 3u * (84u + 12u));
    for (const auto& [name, t] : saved) {
      const bool alpha = name.size() > 6 && name.compare(name.size() - 6, 6, ".alpha") == 0;
      ASSERT_TRUE(full.count(name)) << name;
      EXPECT_EQ(full.at(name).scalar_type(), at::kFloat) << name;
      if (alpha) {
        EXPECT_EQ(t.scalar_type(), at::kFloat) << name;
        EXPECT_EQ(t.item<float>(), 2.0f) << name;  // network_alpha 2, exact
      } else {
        // ... and the user's file holds one rounding of it.
        EXPECT_EQ(t.scalar_type(), dtype) << name;
        EXPECT_TRUE(torch::equal(t, full.at(name).to(dtype))) << name;
      }
    }
    const auto meta = lf::load_safetensors(out + "/e2e.safetensors").metadata;
    EXPECT_EQ(meta.at("ss_mixed_precision"), "no");
    EXPECT_EQ(meta.at("sshs_model_hash").size(), 64u);
  }
}

TEST_F(Precision, Fp8BaseStoresFloat8MatricesAndTracksBf16Losses) {
  const RunResult bf16 = train("bf16", (dir_ / "bf16").string(), 5, "  mixed_precision: bf16\n");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  const int cport = free_port();
  std::string cfg = write_config("fp8.yaml", (dir_ / "fp8").string(), 5, 0, cport, free_port(),
                                 0, "", "", "  mixed_precision: bf16\n");
  std::string y = read_file(cfg);
  y.replace(y.find("  architecture: tiny\n"), 21, "  architecture: tiny\n  fp8_base: true\n");
  std::ofstream(cfg) << y;
  const RunResult fp8 = run_job(cfg, cport, 2, "--verify-sync-every 1");
  ASSERT_EQ(fp8.exit_code, 0) << fp8.output;
  EXPECT_NE(fp8.output.find("frozen weights: UNet bf16+fp8_e4m3fn"), std::string::npos)
      << fp8.output;
  const StepLog a = parse_steps(bf16.output), b = parse_steps(fp8.output);
  ASSERT_EQ(a.loss.size(), 5u);
  ASSERT_EQ(b.loss.size(), 5u);
  // Tolerance: e4m3 keeps 3 mantissa bits (a relative error up to 1/16 per weight); the loss
  // of each of the 5 steps must stay within 2% of the bf16 run's.
  double max_relative = 0.0;
  for (int step = 1; step <= 5; ++step) {
    EXPECT_NEAR(b.loss.at(step), a.loss.at(step), 0.02 * a.loss.at(step)) << "step " << step;
    max_relative = std::max(max_relative, std::abs(b.loss.at(step) / a.loss.at(step) - 1.0));
  }
  std::printf("fp8_base vs bf16: largest relative loss difference over 5 steps %.4f\n",
              max_relative);
  EXPECT_NE(b.loss.at(1), a.loss.at(1)) << "fp8 weights changed nothing: were they stored?";
}

TEST_F(Precision, BadInputFailsWithOneLineNamingTheKey) {
  struct Case {
    std::string training;  // keys added to training:
    std::string extra;     // sections appended
    std::string expected;  // in the error line
    bool worker_side;      // refused by the worker (device checks, exit 3), not the parser
  };
  const std::vector<Case> cases = {
      {"  full_bf16: true\n", "",
       "key 'training.full_bf16': needs training.mixed_precision: bf16 (as kohya), got 'no'",
       false},
      {"  mixed_precision: fp16\n", "",
       "key 'training.mixed_precision': fp16 needs a CUDA device (this rank trains on cpu",
       true},
      {"  gradient_checkpointing: true\n", "  vram_budget_gb: 8\n",
       "key 'worker.vram_budget_gb': expected 0 on the CPU (this rank trains on cpu", true},
  };
  for (const Case& c : cases) {
    const int cport = free_port();
    std::string cfg = write_config("bad.yaml", (dir_ / "bad").string(), 2, 0, cport, free_port(),
                                   0, "", "", c.training);
    if (!c.extra.empty()) {
      std::string y = read_file(cfg);
      y.replace(y.find("worker:\n"), 8, "worker:\n" + c.extra);
      std::ofstream(cfg) << y;
    }
    std::string coord;
    const RunResult r = run_job(cfg, cport, 2, "--connect-timeout 5", &coord, "");
    EXPECT_NE(r.exit_code, 0) << c.expected;
    const std::string& where = c.worker_side ? r.output : coord;
    const std::size_t at = where.find(c.expected);
    ASSERT_NE(at, std::string::npos) << c.expected << "\n" << r.output << "\n" << coord;
    const std::size_t line_start = where.rfind('\n', at) + 1;
    const std::string line = where.substr(line_start, where.find('\n', at) - line_start);
    EXPECT_NE(line.find(cfg), std::string::npos) << "the line names the file: " << line;
    if (c.worker_side) {
      EXPECT_NE(line.find("(exit 3)"), std::string::npos) << line;
      // The coordinator ends the job on the refusal instead of awaiting a restarted group.
      EXPECT_NE(coord.find("stopped on bad input (exit 3; a restart would fail the same way): " +
                           cfg + ": " + c.expected),
                std::string::npos)
          << coord;
      EXPECT_EQ(coord.find("did not form"), std::string::npos) << coord;
    }
  }
}

}  // namespace
