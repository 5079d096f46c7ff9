// End-to-end: coordinator + `mpirun -np 2` workers train the tiny model on real photographs.
// Checks that the loss is finite, that both ranks hold identical LoRA weights after every step
// (the workers' --verify-sync-every 1 digests), that N steps + --resume N more give the same LoRA
// tensors byte for byte as 2N straight, that both /metrics endpoints pass promtool, and that bad
// input fails with a message naming the culprit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <regex>
#include <string>
#include <thread>

#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"
#include "worker/io/tensor_file.h"

namespace fs = std::filesystem;

namespace {

const std::string kDemo = std::string(LF_SOURCE_DIR) + "/.deps/demo";

using lf::test::free_port;
using lf::test::mpirun;
using lf::test::read_file;
using lf::test::run;
using lf::test::RunResult;

// A small job: 3 training photos x 2 repeats + 2 greyscale reg photos, 128 px buckets.
class EndToEnd : public lf::test::TinyJobTest {};

using lf::test::expect_same_lora;
using lf::test::lora_tensors;

TEST_F(EndToEnd, TwoRanksStayInSyncWithFiniteLossAndValidMetrics) {
  const int cport = free_port(), mport = free_port(), wport = free_port();
  const std::string out = (dir_ / "run").string();
  const std::string cfg = write_config("job.yaml", out, 6, 3, cport, mport, wport,
                                       "coordinator_linger_placeholder: 0\n");
  // The placeholder key must be refused with file:line (strict config), proving the check runs.
  std::string bad_out;
  RunResult bad = run(std::string(LF_COORDINATOR_BIN) + " --config " + cfg);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find(cfg + ":"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("coordinator_linger_placeholder"), std::string::npos) << bad.output;

  const std::string good = write_config("job_ok.yaml", out, 6, 3, cport, mport, wport);
  // Scrape both endpoints while they linger after training.
  auto scrape = std::async(std::launch::async, [&] {
    for (int i = 0; i < 600; ++i) {
      if (fs::exists(out + "/metrics/worker_rank1.prom")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::map<std::string, RunResult> r;
    for (int port : {mport, wport, wport + 1}) {
      const std::string file = (dir_ / ("scrape_" + std::to_string(port) + ".txt")).string();
      r["curl" + std::to_string(port)] =
          run("curl -sf http://127.0.0.1:" + std::to_string(port) + "/metrics -o " + file);
      r["promtool" + std::to_string(port)] = run("promtool check metrics < " + file);
      r["body" + std::to_string(port)].output = read_file(file);
    }
    return r;
  });
  const std::string coord_good = good;
  auto coord = std::async(std::launch::async, [&] {
    return run(std::string(LF_COORDINATOR_BIN) + " --config " + coord_good + " --linger-seconds 4");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  RunResult w =
      run(mpirun(2) + " " + LF_WORKER_BIN + " --coordinator 127.0.0.1:" + std::to_string(cport) +
          " --no-progress-bar --verify-sync-every 1 --metrics-linger-seconds 4");
  RunResult c = coord.get();
  auto scraped = scrape.get();
  ASSERT_EQ(w.exit_code, 0) << w.output << "\n--- coordinator ---\n" << c.output;
  ASSERT_EQ(c.exit_code, 0) << c.output;

  // Every step: both ranks logged the same LoRA digest and a finite loss.
  std::regex line(
      R"(\[rank (\d) INFO\] sync check global_step (\d+) loss (\S+) lora_sha256 ([0-9a-f]{64}))");
  std::map<int, std::map<int, std::string>> digest;  // step -> rank -> sha
  for (auto it = std::sregex_iterator(w.output.begin(), w.output.end(), line);
       it != std::sregex_iterator(); ++it) {
    const int rank = std::stoi((*it)[1]);
    const int step = std::stoi((*it)[2]);
    const double loss = std::stod((*it)[3]);
    EXPECT_TRUE(std::isfinite(loss) && loss > 0.0) << "step " << step << " loss " << loss;
    digest[step][rank] = (*it)[4];
  }
  ASSERT_EQ(digest.size(), 6u) << w.output;
  for (const auto& [step, per_rank] : digest) {
    ASSERT_EQ(per_rank.size(), 2u) << "step " << step;
    EXPECT_EQ(per_rank.at(0), per_rank.at(1)) << "ranks diverged at step " << step;
  }
  EXPECT_NE(digest[1][0], digest[6][0]) << "LoRA weights did not change while training";

  // The LoRA file: kohya keys, 6 steps recorded, non-zero up weights after training.
  const auto lora = lf::load_safetensors(out + "/e2e.safetensors");
  EXPECT_EQ(lora.metadata.at("ss_steps"), "6");
  EXPECT_EQ(lora.metadata.at("ss_network_module"), "networks.lora");
  EXPECT_EQ(lora.metadata.at("ss_network_dim"), "4");
  EXPECT_EQ(lora.metadata.at("ss_network_alpha"), "2.0");
  EXPECT_EQ(lora.metadata.at("sshs_model_hash").size(), 64u);
  const std::string key = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
  ASSERT_TRUE(lora.tensors.count(key + ".lora_up.weight"));
  EXPECT_GT(lora.tensors.at(key + ".lora_up.weight").abs().sum().item<double>(), 0.0);
  EXPECT_FLOAT_EQ(lora.tensors.at(key + ".alpha").item<float>(), 2.0f);
  // The text encoder's LoRA trains too by default (kohya): 2 layers x 6 modules, lora_te_ keys.
  const std::string te_key = "lora_te_text_model_encoder_layers_1_self_attn_q_proj";
  ASSERT_TRUE(lora.tensors.count(te_key + ".lora_up.weight"));
  EXPECT_GT(lora.tensors.at(te_key + ".lora_up.weight").abs().sum().item<double>(), 0.0);
  EXPECT_EQ(lora.tensors.size(), 3u * (84u + 12u));
  EXPECT_EQ(lora.metadata.at("ss_base_model_version"), "sd_v1");
  EXPECT_TRUE(fs::exists(out + "/checkpoints/step-00000006/rng/rank-1.safetensors"));

  // Live /metrics of the coordinator and both workers: served, promtool-clean, real values.
  for (int port : {mport, wport, wport + 1}) {
    const std::string p = std::to_string(port);
    EXPECT_EQ(scraped["curl" + p].exit_code, 0) << "curl :" << p;
    EXPECT_EQ(scraped["promtool" + p].exit_code, 0)
        << "promtool on :" << p << ": " << scraped["promtool" + p].output;
  }
  EXPECT_NE(scraped["body" + std::to_string(mport)].output.find("lorafleet_global_step 6"),
            std::string::npos)
      << scraped["body" + std::to_string(mport)].output;
  EXPECT_NE(scraped["body" + std::to_string(wport)].output.find(
                "lorafleet_worker_global_step{rank=\"0\"} 6"),
            std::string::npos)
      << scraped["body" + std::to_string(wport)].output;
}

TEST_F(EndToEnd, ResumeGivesByteIdenticalLoRA) {
  const int cport = free_port(), mport = free_port();
  // 2N = 6 straight.
  const std::string straight = (dir_ / "straight").string();
  RunResult a = run_job(write_config("a.yaml", straight, 6, 0, cport, mport, 0), cport, 2, "");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  // N = 3, stop, then --resume for N more.
  const std::string split = (dir_ / "split").string();
  const std::string cfg = write_config("b.yaml", split, 6, 0, cport, mport, 0);
  RunResult b1 = run_job(cfg, cport, 2, "--stop-at-step 3");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  ASSERT_TRUE(fs::exists(split + "/checkpoints/step-00000003/train_state.safetensors"));
  // Starting fresh over existing checkpoints is refused (nothing overwritten).
  RunResult again = run_job(cfg, cport, 2, "");
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(
      again.output.find(cfg + ": key 'output.output_dir': " + split + " already holds checkpoints"),
      std::string::npos)
      << again.output;
  EXPECT_NE(again.output.find("(exit 3)"), std::string::npos) << again.output;  // not retried
  RunResult b2 = run_job(cfg, cport, 2, "--resume " + split);
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  EXPECT_NE(b2.output.find("resumed from"), std::string::npos) << b2.output;

  expect_same_lora(straight + "/e2e.safetensors", split + "/e2e.safetensors");
  EXPECT_EQ(lf::load_safetensors(split + "/e2e.safetensors").metadata.at("ss_steps"), "6");
  // Resuming the finished run: nothing to train, and the summary names the resumed checkpoint
  // and its own LoRA (not <output_name>.safetensors, which another run may have written).
  RunResult done = run_job(with_rendezvous_timeout(cfg, 60), cport, 2, "--resume " + split);
  ASSERT_EQ(done.exit_code, 0) << done.output;
  const std::string last = split + "/checkpoints/step-00000006";
  EXPECT_NE(done.output.find("nothing to train: the checkpoint resumed from, " + last +
                             ", is at global_step 6"),
            std::string::npos)
      << done.output;
  EXPECT_NE(done.output.find("lorafleet: LoRA        " + last + "/lora.safetensors"),
            std::string::npos)
      << done.output;

  // network_weights: continue from the trained LoRA. With learning_rate 0 one step changes
  // nothing (AdamW's decoupled decay is lr * weight_decay), so the result must equal the file
  // that was loaded, which proves the weights were loaded and broadcast, not re-initialised.
  const std::string cont = (dir_ / "continued").string();
  const std::string cfg_c = write_config("c.yaml", cont, 1, 0, cport, mport, 0);
  {
    std::string y = read_file(cfg_c);
    y.replace(y.find("  learning_rate: 0.001"), 22, "  learning_rate: 0.0");
    y.replace(y.find("network:\n"), 9,
              "network:\n  network_weights: " + straight + "/e2e.safetensors\n");
    std::ofstream(cfg_c) << y;
  }
  RunResult c = run_job(cfg_c, cport, 2, "");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  // Equal to the loaded file: network_weights was loaded (and broadcast), not re-initialised.
  expect_same_lora(straight + "/e2e.safetensors", cont + "/e2e.safetensors");

  // kohya --dim_from_weights: network_dim 8 does not fit the file (rank 4), but the network takes
  // each module's rank and alpha from it, so the same file comes back.
  const std::string dims = (dir_ / "dims").string();
  const std::string cfg_d = write_config("d.yaml", dims, 1, 0, cport, mport, 0);
  {
    std::string y = read_file(cfg_d);
    y.replace(y.find("  learning_rate: 0.001"), 22, "  learning_rate: 0.0");
    y.replace(y.find("network:\n  network_dim: 4\n"), 26,
              "network:\n  network_dim: 8\n  dim_from_weights: true\n  network_weights: " +
                  straight + "/e2e.safetensors\n");
    std::ofstream(cfg_d) << y;
  }
  RunResult d = run_job(cfg_d, cport, 2, "");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  expect_same_lora(straight + "/e2e.safetensors", dims + "/e2e.safetensors");
}

// kohya's noise, timestep and loss options and its network options (issue 12) draw only from
// the seeded per-step streams: both ranks stay identical every step, and N + --resume N gives
// the same bytes as 2N. The network options are the three LoRA dropouts, block lr weights and
// per-block ranks: a run with gradient checkpointing (whose recompute replays the dropout
// masks) gives the same bytes, the saved file has each block's ranks and alphas, and the options
// change the result (the LoRA differs from the plain objective's).
TEST_F(EndToEnd, KohyaNoiseAndLossOptionsKeepRanksInSyncAndResumeExact) {
  const int cport = free_port(), mport = free_port();
  const std::string recipe =
      "  loss_type: huber\n  huber_schedule: snr\n  min_snr_gamma: 5\n  noise_offset: 0.05\n"
      "  noise_offset_random_strength: true\n  adaptive_noise_scale: 0.01\n"
      "  ip_noise_gamma: 0.1\n  ip_noise_gamma_random_strength: true\n  min_timestep: 100\n"
      "  max_timestep: 900\n  scale_weight_norms: 0.0001\n";
  // Per-block ranks (kohya's 25 SD blocks): block 1 (down_blocks_0) rank 2, the mid block (12)
  // left out, block 13 (up_blocks_0_attentions_0) rank 3 with alpha 6, the others rank 4.
  std::string dims, alphas;
  for (int b = 0; b < 25; ++b) {
    dims += std::string(b ? "," : "") + (b == 1 ? "2" : b == 12 ? "0" : b == 13 ? "3" : "4");
    alphas += std::string(b ? "," : "") + (b == 13 ? "6" : "2");
  }
  const std::string network =
      "network:\n  network_dropout: 0.1\n  rank_dropout: 0.2\n  module_dropout: 0.1\n"
      "  down_lr_weight: sine+0.5\n  up_lr_weight: cosine+0.5\n  block_dims: " +
      dims + "\n  block_alphas: " + alphas + "\n";
  auto config = [&](const std::string& name, const std::string& out, const std::string& extra) {
    const std::string path = write_config(name, out, 4, 0, cport, mport, 0, "", "", recipe + extra);
    std::string y = read_file(path);
    y.replace(y.find("network:\n"), 9, network);
    std::ofstream(path) << y;
    return path;
  };
  const std::string straight = (dir_ / "straight").string();
  RunResult a = run_job(config("a.yaml", straight, ""), cport, 2, "--verify-sync-every 1");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  // The max-norm constraint acted after some step (and every rank scaled the same modules).
  EXPECT_NE(a.output.find("modules scaled, mean key norm"), std::string::npos) << a.output;
  const std::string split = (dir_ / "split").string();
  const std::string cfg = config("b.yaml", split, "");
  RunResult b1 = run_job(cfg, cport, 2, "--stop-at-step 2");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  RunResult b2 = run_job(cfg, cport, 2, "--resume " + split);
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  expect_same_lora(straight + "/e2e.safetensors", split + "/e2e.safetensors");
  const std::string ckpt = (dir_ / "ckpt").string();
  RunResult d = run_job(config("d.yaml", ckpt, "  gradient_checkpointing: true\n"), cport, 2, "");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  expect_same_lora(straight + "/e2e.safetensors", ckpt + "/e2e.safetensors");

  const auto with = lf::load_safetensors(straight + "/e2e.safetensors");
  const std::string q = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q";
  EXPECT_EQ(with.tensors.at(q + ".lora_down.weight").sizes(), at::IntArrayRef({2, 32}));
  EXPECT_EQ(with.tensors.at(q + ".alpha").item<float>(), 2.0f);
  const std::string out = "lora_unet_up_blocks_0_attentions_0_proj_out";
  EXPECT_EQ(with.tensors.at(out + ".lora_up.weight").sizes(), at::IntArrayRef({64, 3, 1, 1}));
  EXPECT_EQ(with.tensors.at(out + ".alpha").item<float>(), 6.0f);
  EXPECT_EQ(with.tensors.at("lora_unet_up_blocks_1_attentions_1_proj_in.lora_down.weight").size(0),
            4);
  for (const auto& [key, tensor] : with.tensors) {
    EXPECT_EQ(key.find("mid_block"), std::string::npos) << key << ": block 12 has rank 0";
  }
  // The text encoder keeps network_dim (kohya's block_dims are the UNet's).
  EXPECT_EQ(with.tensors.at("lora_te_text_model_encoder_layers_1_mlp_fc1.lora_down.weight").size(0),
            4);
  EXPECT_NE(with.metadata.at("ss_network_args").find("\"block_dims\": \"" + dims + "\""),
            std::string::npos);
  EXPECT_EQ(with.metadata.at("ss_network_dropout"), "0.1");

  // The dropouts act: without them (all else equal) the LoRA differs.
  const std::string no_dropout = (dir_ / "no_dropout").string();
  {
    const std::string path = config("e.yaml", no_dropout, "");
    std::string y = read_file(path);
    const std::string dropouts =
        "  network_dropout: 0.1\n  rank_dropout: 0.2\n  module_dropout: 0.1\n";
    y.erase(y.find(dropouts), dropouts.size());
    std::ofstream(path) << y;
    RunResult e = run_job(path, cport, 2, "");
    ASSERT_EQ(e.exit_code, 0) << e.output;
  }
  const auto undropped = lf::load_safetensors(no_dropout + "/e2e.safetensors");
  std::size_t changed = 0;
  for (const auto& [key, tensor] : with.tensors) {
    changed += !at::equal(tensor, undropped.tensors.at(key));
  }
  EXPECT_GT(changed, with.tensors.size() / 4) << "the LoRA dropouts changed nothing";

  const std::string plain = (dir_ / "plain").string();
  RunResult c = run_job(write_config("c.yaml", plain, 4, 0, cport, mport, 0), cport, 2, "");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const auto without = lf::load_safetensors(plain + "/e2e.safetensors");
  bool differs = false;
  for (const auto& [key, tensor] : with.tensors) {
    differs = differs || !without.tensors.count(key) || !at::equal(tensor, without.tensors.at(key));
  }
  EXPECT_TRUE(differs) << "the noise, loss and network options changed nothing";
}

// kohya's epoch saves (issue 12): save_every_n_epochs 1 over 3 epochs writes a checkpoint and
// <output_name>-00000N after epochs 1 and 2 and <output_name> at the end; save_last_n_epochs 1
// removes epoch 1's file once epoch 2's is written.
TEST_F(EndToEnd, EpochSavesAreNamedAndThinnedOutAsKohya) {
  const int cport = free_port(), mport = free_port();
  const std::string out = (dir_ / "epochs").string();
  RunResult r = run_job(
      write_config("e.yaml", out, 1, 0, cport, mport, 0, "", "",
                   "  max_train_epochs: 3\n  save_every_n_epochs: 1\n  save_last_n_epochs: 1\n"),
      cport, 2, "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(out + "/e2e-000001.safetensors"));
  ASSERT_TRUE(fs::exists(out + "/e2e-000002.safetensors"));
  EXPECT_FALSE(fs::exists(out + "/e2e-000003.safetensors"));  // the last epoch is the final save
  ASSERT_TRUE(fs::exists(out + "/e2e.safetensors"));
  EXPECT_EQ(lf::load_safetensors(out + "/e2e-000002.safetensors").metadata.at("ss_epoch"), "2");
  EXPECT_EQ(lf::load_safetensors(out + "/e2e.safetensors").metadata.at("ss_epoch"), "3");
  int checkpoints = 0;
  for (const auto& e : fs::directory_iterator(out + "/checkpoints")) {
    checkpoints += e.path().filename().string().rfind("step-", 0) == 0;
  }
  EXPECT_EQ(checkpoints, 3);  // after epochs 1, 2 and at the end
  for (const auto& e : fs::directory_iterator(out)) {
    EXPECT_EQ(e.path().filename().string().find("-step"), std::string::npos) << e.path();
  }
}

// Issue 3's data path end to end on 2 ranks: per-sample flip, caption shuffle and tag dropout
// planned by the coordinator, reg_selection rotate over 9 reg images, latents and text-encoder
// outputs cached on disk, two batches per optimizer step. A run stopped at step 4 and resumed
// ends byte-identical to a straight run, and the resumed half reads its latents back from the
// disk cache.
TEST_F(EndToEnd, DataOptionsAndDiskCacheResumeByteIdentical) {
  for (const auto& e : fs::directory_iterator(kDemo + "/reg/1_photo")) {
    const fs::path to = dir_ / "reg/1_grey" / e.path().filename();
    if (!fs::exists(to)) fs::copy_file(e.path(), to);
  }
  const int cport = free_port(), mport = free_port();
  const std::string data =
      "  reg_selection: rotate\n  flip_aug: true\n  shuffle_caption: true\n"
      "  keep_tokens: 1\n  caption_tag_dropout_rate: 0.2\n  cache_latents_to_disk: true\n"
      "  cache_text_encoder_outputs_to_disk: true\n";
  // Two global batches per optimizer step (training.gradient_accumulation_steps); cached
  // text-encoder outputs need frozen text encoders (kohya: --network_train_unet_only).
  auto with_accumulation = [this](const std::string& path) {
    std::string y = read_file(with_unet_only(path));
    y.replace(y.find("  max_train_steps:"), 18,
              "  gradient_accumulation_steps: 2\n  max_train_steps:");
    std::ofstream(path) << y;
    return path;
  };
  const std::string straight = (dir_ / "straight").string();
  const std::string cfg_a =
      with_accumulation(write_config("a.yaml", straight, 8, 0, cport, mport, 0, "", data));

  // inspect: no model, the subsets, the bucket table and the steps for a world size.
  RunResult insp =
      run(std::string(LF_COORDINATOR_BIN) + " --config " + cfg_a + " --inspect --world-size 2");
  ASSERT_EQ(insp.exit_code, 0) << insp.output;
  EXPECT_NE(insp.output.find("[train] " + (dir_ / "train/2_photo").string() +
                             ": 3 images x 2 repeats = 6 samples"),
            std::string::npos)
      << insp.output;
  EXPECT_NE(insp.output.find("[reg] " + (dir_ / "reg/1_grey").string() +
                             ": 9 images x 1 repeats = 9 samples; epoch 1 uses 6 of them"),
            std::string::npos)
      << insp.output;
  EXPECT_NE(insp.output.find("number of train images (including repeats): 6"), std::string::npos);
  EXPECT_NE(insp.output.find("gradient_accumulation_steps 2"), std::string::npos);
  EXPECT_NE(insp.output.find("total optimization steps: 8"), std::string::npos);

  RunResult a = run_job(cfg_a, cport, 2, "");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  // 3 train images x 2 flips + 9 reg x 2 flips: every entry encoded once, by one rank.
  int latent_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(straight + "/cache/latents")) {
    latent_files += e.path().extension() == ".safetensors" ? 1 : 0;
  }
  EXPECT_EQ(latent_files, (3 + 9) * 2);

  const std::string split = (dir_ / "split").string();
  const std::string cfg_b =
      with_accumulation(write_config("b.yaml", split, 8, 0, cport, mport, 0, "", data));
  RunResult b1 = run_job(cfg_b, cport, 2, "--stop-at-step 4");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  // Resuming with another grouping of batches would change the schedule: refused.
  const std::string cfg_c =
      with_unet_only(write_config("c.yaml", split, 8, 0, cport, mport, 0, "", data));
  RunResult regrouped = run_job(cfg_c, cport, 2, "--resume " + split);
  EXPECT_EQ(regrouped.exit_code, 3) << "a config mismatch is bad input, not worth a retry";
  EXPECT_NE(regrouped.output.find("key 'training.gradient_accumulation_steps': the checkpoint was "
                                  "trained with 2, the job has 1"),
            std::string::npos)
      << regrouped.output;
  // So would a plan trained on other samples (here flip_aug off): refused before any model loads.
  std::string no_flip = data;
  no_flip.replace(no_flip.find("  flip_aug: true\n"), 17, "");
  const std::string cfg_d =
      with_accumulation(write_config("d.yaml", split, 8, 0, cport, mport, 0, "", no_flip));
  RunResult replanned = run_job(cfg_d, cport, 2, "--resume " + split);
  EXPECT_NE(replanned.exit_code, 0);
  EXPECT_NE(replanned.output.find("differs from the one the checkpoint was trained on"),
            std::string::npos)
      << replanned.output;
  RunResult b2 = run_job(cfg_b, cport, 2, "--resume " + split);
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  // Both ranks read every latent from the disk cache written by the first half.
  std::size_t reused_lines = 0;
  for (std::size_t at = b2.output.find(": 0 encoded by this rank"); at != std::string::npos;
       at = b2.output.find(": 0 encoded by this rank", at + 1)) {
    ++reused_lines;
  }
  EXPECT_EQ(reused_lines, 2u) << b2.output;

  expect_same_lora(straight + "/e2e.safetensors", split + "/e2e.safetensors");
  const auto meta = lf::load_safetensors(split + "/e2e.safetensors").metadata;
  EXPECT_EQ(meta.at("ss_flip_aug"), "True");
  EXPECT_EQ(meta.at("ss_shuffle_caption"), "True");
  EXPECT_EQ(meta.at("ss_keep_tokens"), "1");
  EXPECT_EQ(meta.at("ss_gradient_accumulation_steps"), "2");
  EXPECT_EQ(meta.at("ss_total_batch_size"), "4");  // 1 per rank x 2 ranks x 2 batches
  EXPECT_EQ(meta.at("ss_steps"), "8");
}

// A checkpoint trained without text-encoder modules (network_train_unet_only, or lorafleet before
// they became the default) resumes UNet-only under a config that would now train them, with a
// warning, and ends as the straight UNet-only run does.
TEST_F(EndToEnd, UNetOnlyCheckpointResumesUNetOnly) {
  const int cport = free_port(), mport = free_port();
  const std::string straight = (dir_ / "straight").string();
  RunResult a = run_job(with_unet_only(write_config("a.yaml", straight, 4, 0, cport, mport, 0)),
                        cport, 1, "");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::string split = (dir_ / "split").string();
  RunResult b1 = run_job(with_unet_only(write_config("b.yaml", split, 4, 2, cport, mport, 0)),
                         cport, 1, "--stop-at-step 2");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  // The same job without network_train_unet_only: text-encoder LoRA is the default now.
  RunResult b2 =
      run_job(write_config("c.yaml", split, 4, 2, cport, mport, 0), cport, 1, "--resume " + split);
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  EXPECT_NE(b2.output.find("was trained without text-encoder LoRA modules; resuming it "
                           "UNet-only"),
            std::string::npos)
      << b2.output;
  expect_same_lora(straight + "/e2e.safetensors", split + "/e2e.safetensors");
  const auto lora = lf::load_safetensors(split + "/e2e.safetensors");
  EXPECT_EQ(lora.tensors.size(), 3u * 84u);  // UNet modules only
}

// A job token given to the coordinator (coordinator.job_token_file) and to the workers
// (--job-token-file): a worker without it is refused, the workers with it train, and the token
// appears in no file the run wrote and in no log line of either process (debug level).
TEST_F(EndToEnd, JobTokenIsRequiredAndNeverWritten) {
  const int cport = free_port(), mport = free_port(), wport = free_port();
  const std::string out = (dir_ / "run").string();
  const std::string token = "e2e-job-token-" + std::to_string(getpid()) + "-7c41d9a0b2e3";
  const fs::path token_file = dir_ / "secrets/job.token";
  fs::create_directories(token_file.parent_path());
  std::ofstream(token_file) << token << "\n";
  const std::string cfg = write_config("job.yaml", out, 2, 2, cport, mport, wport);
  {
    std::string y = read_file(cfg);
    y.replace(y.find("coordinator:\n"), 13,
              "coordinator:\n  job_token_file: " + token_file.string() + "\n");
    std::ofstream(cfg) << y;
  }
  auto coord = std::async(std::launch::async, [&] {
    return run("LF_LOG_LEVEL=debug " + std::string(LF_COORDINATOR_BIN) + " --config " + cfg);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string worker = std::string(LF_WORKER_BIN) +
                             " --coordinator 127.0.0.1:" + std::to_string(cport) +
                             " --no-progress-bar --connect-timeout 20";
  RunResult refused = run("env -u LF_JOB_TOKEN -u LF_JOB_TOKEN_FILE " + mpirun(1) + " " + worker);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("missing or wrong job token"), std::string::npos) << refused.output;
  RunResult w = run("LF_LOG_LEVEL=debug " + mpirun(2) + " " + worker + " --job-token-file " +
                    token_file.string());
  RunResult c = coord.get();
  ASSERT_EQ(w.exit_code, 0) << w.output << "\n--- coordinator ---\n" << c.output;
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("job token required"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("rejected Register from"), std::string::npos) << c.output;
  ASSERT_TRUE(fs::exists(out + "/e2e.safetensors"));
  ASSERT_TRUE(fs::exists(out + "/metrics/coordinator.prom"));

  for (const RunResult* r : {&refused, &w, &c}) {
    EXPECT_EQ(r->output.find(token), std::string::npos) << r->output;
  }
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
    if (!entry.is_regular_file() || entry.path() == token_file) continue;
    const std::string bytes = read_file(entry.path().string());
    EXPECT_EQ(bytes.find(token), std::string::npos) << "the job token leaked into " << entry.path();
    ++files;
  }
  EXPECT_GT(files, 10);  // LoRA, checkpoint files, metrics snapshots, the config...
}

TEST_F(EndToEnd, BadInputFailsWithAClearMessage) {
  const int cport = free_port(), mport = free_port();
  // Unreachable coordinator: the worker names the address and exits non-zero.
  const int dead = free_port();
  RunResult w = run(mpirun(1) + " " + LF_WORKER_BIN +
                    " --coordinator 127.0.0.1:" + std::to_string(dead) + " --connect-timeout 2");
  EXPECT_NE(w.exit_code, 0);
  EXPECT_NE(w.output.find("127.0.0.1:" + std::to_string(dead)), std::string::npos) << w.output;

  // Missing dataset folder.
  std::string cfg = write_config("missing.yaml", (dir_ / "o1").string(), 2, 0, cport, mport, 0);
  fs::rename(dir_ / "train", dir_ / "train_moved");
  RunResult c = run(std::string(LF_COORDINATOR_BIN) + " --config " + cfg);
  EXPECT_EQ(c.exit_code, 3) << c.output;  // bad input: not worth a restart
  EXPECT_NE(c.output.find((dir_ / "train").string()), std::string::npos) << c.output;
  fs::rename(dir_ / "train_moved", dir_ / "train");

  // An image that does not decode (skimage's own truncated.jpg is a real truncated JPEG).
  const fs::path bad = dir_ / "train/2_photo/broken.png";
  { std::ofstream(bad) << "not an image"; }
  c = run(std::string(LF_COORDINATOR_BIN) + " --config " + cfg);
  EXPECT_EQ(c.exit_code, 3) << c.output;  // bad input: not worth a restart
  EXPECT_NE(c.output.find(bad.string()), std::string::npos) << c.output;
  fs::remove(bad);

  // Missing base checkpoint: the coordinator refuses before any worker loads a model.
  std::string cfg2 = write_config("nockpt.yaml", (dir_ / "o2").string(), 2, 0, cport, mport, 0);
  fs::rename(checkpoint_, checkpoint_ + ".moved");
  c = run(std::string(LF_COORDINATOR_BIN) + " --config " + cfg2);
  EXPECT_EQ(c.exit_code, 3) << c.output;  // bad input: not worth a restart
  EXPECT_NE(c.output.find(checkpoint_), std::string::npos) << c.output;
  // A PyTorch pickle (torch.save writes a zip archive) in its place: refused before training,
  // recognised by content, with a hint to convert it.
  {
    std::ofstream(checkpoint_, std::ios::binary) << "PK\x03\x04"
                                                    "archive/data.pkl";
  }
  c = run(std::string(LF_COORDINATOR_BIN) + " --config " + cfg2);
  EXPECT_EQ(c.exit_code, 3) << c.output;  // bad input: not worth a restart
  EXPECT_NE(c.output.find(checkpoint_), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("pickle"), std::string::npos) << c.output;
  fs::rename(checkpoint_ + ".moved", checkpoint_);
  // A network_weights file that is missing: refused by the coordinator, naming the key, before
  // any rank loads the model to open it.
  const std::string no_weights = (dir_ / "no_such_lora.safetensors").string();
  const std::string cfg3 =
      write_config("noweights.yaml", (dir_ / "o3").string(), 2, 0, cport, mport, 0);
  {
    std::string y = read_file(cfg3);
    y.replace(y.find("network:\n"), 9, "network:\n  network_weights: " + no_weights + "\n");
    std::ofstream(cfg3) << y;
  }
  c = run(std::string(LF_COORDINATOR_BIN) + " --config " + cfg3);
  EXPECT_EQ(c.exit_code, 3) << c.output;
  EXPECT_NE(c.output.find("network.network_weights: " + no_weights + " does not exist"),
            std::string::npos)
      << c.output;
  EXPECT_FALSE(fs::exists(dir_ / "o1/e2e.safetensors"));
}

}  // namespace
