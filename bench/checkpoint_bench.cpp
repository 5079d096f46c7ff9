// lorafleet-bench-checkpoint: writes and reads a realistic checkpoint through the real checkpoint
// code, N times, and prints MB/s. bench/run_checkpoint_bench.sh puts `dd` numbers for the same
// byte count on the same filesystem next to it (bench/README.md, "Checkpoint throughput").
//
// The checkpoint is an SD1.5-sized LoRA: modules whose (in, out) dims cycle through SD1.5's
// attention / projection widths, rank R, fp32, until --lora-mb MB (default 38, a rank-32 SD1.5
// LoRA), plus AdamW state of twice that (exp_avg, exp_avg_sq) and one rank's RNG file.
// Write = what CheckpointWriter does on one rank: prepare_staging_dir, save_rng_state,
// save_kohya_lora (with its sshs hashes), save_train_state (each file: temp, fsync, rename,
// fsync dir), publish_staging_dir (rename + fsync, then COMMITTED with sizes and sha256 of every
// file, taken from the writers' digests as CheckpointWriter passes them), prune_checkpoints(keep
// 2). Read = what a resume does: resolve_checkpoint, load_train_state, load_safetensors(lora),
// load_rng_state.
//
// usage: lorafleet-bench-checkpoint --dir DIR [--repeats N] [--rank R] [--lora-mb MB]
// Prints one JSON line: bytes (whole checkpoint), tensors, repeats, write_s / read_s /
// verify_s (medians), write_mb_s, read_mb_s (MB = 10^6 bytes), save_s / save_mb_s (the write
// without its prune_checkpoints: the new checkpoint made durable and committed, what dd's figure
// compares with, since run_checkpoint_bench.sh deletes dd's file outside dd's timing), and the
// write's phases (medians): lora_s (save_kohya_lora with its sshs hashes), state_s
// (save_train_state), publish_s (rename + COMMITTED), prune_s (deleting the checkpoint that
// fell out of the newest 2: none in the first two repeats).

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "worker/io/checkpoint.h"
#include "worker/io/lora_file.h"
#include "worker/io/tensor_file.h"
#include "worker/train/rng_streams.h"

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int usage() {
  std::fprintf(stderr,
               "usage: lorafleet-bench-checkpoint --dir DIR [--repeats N] [--rank R] "
               "[--lora-mb MB]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int repeats = 5;
  std::int64_t rank = 32;
  double lora_mb = 38.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    if (a == "--dir") {
      dir = argv[++i];
    } else if (a == "--repeats") {
      repeats = std::atoi(argv[++i]);
    } else if (a == "--rank") {
      rank = std::atoll(argv[++i]);
    } else if (a == "--lora-mb") {
      lora_mb = std::atof(argv[++i]);
    } else {
      return usage();
    }
  }
  if (dir.empty() || repeats < 1 || rank < 1 || lora_mb <= 0) return usage();
  torch::manual_seed(0);

  // (in, out) widths of SD1.5 LoRA targets: attention q/k/v/out at 320/640/1280, cross-attention
  // k/v from the 768-wide text context, feed-forward (GEGLU 4x), and the CLIP text encoder (768).
  const std::vector<std::pair<std::int64_t, std::int64_t>> widths = {
      {320, 320},    {768, 320},   {320, 2560}, {1280, 320},  {640, 640},
      {768, 640},    {640, 5120},  {2560, 640}, {1280, 1280}, {768, 1280},
      {1280, 10240}, {5120, 1280}, {768, 768},  {768, 3072},  {3072, 768}};
  std::map<std::string, at::Tensor> lora;
  std::map<std::string, at::Tensor> optimizer;
  std::int64_t lora_bytes = 0;
  for (int m = 0; lora_bytes < static_cast<std::int64_t>(lora_mb * 1e6); ++m) {
    const auto [in, out] = widths[m % widths.size()];
    char name[64];
    std::snprintf(name, sizeof(name), "lora_unet_module_%04d", m);
    const std::string n = name;
    lora[n + ".lora_down.weight"] = torch::randn({rank, in});
    lora[n + ".lora_up.weight"] = torch::randn({out, rank}) * 1e-3;
    lora[n + ".alpha"] = torch::tensor(static_cast<float>(rank));
    lora_bytes += 4 * (rank * in + out * rank + 1);
    for (const char* w : {".lora_down.weight", ".lora_up.weight"}) {
      const at::Tensor& p = lora[n + w];
      optimizer[n + w + ".exp_avg"] = torch::randn_like(p) * 1e-4;
      optimizer[n + w + ".exp_avg_sq"] = torch::rand_like(p) * 1e-8;
    }
  }
  lf::TrainState state;
  state.world_size = 1;
  state.shared_seed = 42;
  state.optimizer = optimizer;
  const at::Tensor rng_state = lf::make_noise_generator(42, 0, 1).get_state();
  const std::map<std::string, std::string> metadata = {{"ss_network_dim", std::to_string(rank)},
                                                       {"ss_network_module", "networks.lora"}};

  const std::string root = (fs::path(dir) / "checkpoints").string();
  fs::remove_all(root);
  fs::create_directories(root);
  std::vector<double> write_s, save_s, lora_s, state_s, publish_s, prune_s, read_s, verify_s;
  std::uint64_t bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    state.global_step = r + 1;
    auto t0 = std::chrono::steady_clock::now();
    const std::string staging = lf::prepare_staging_dir(root, state.global_step);
    lf::WrittenFiles written;
    written[lf::rng_state_file(0)] = lf::save_rng_state(staging, 0, rng_state);
    auto t1 = std::chrono::steady_clock::now();
    written[lf::kCheckpointLoraFile] =
        lf::save_kohya_lora((fs::path(staging) / lf::kCheckpointLoraFile).string(), lora, metadata);
    lora_s.push_back(seconds_since(t1));
    t1 = std::chrono::steady_clock::now();
    written[lf::kCheckpointStateFile] = lf::save_train_state(staging, state);
    state_s.push_back(seconds_since(t1));
    t1 = std::chrono::steady_clock::now();
    const std::string published =
        lf::publish_staging_dir(staging, root, state.global_step, written);
    publish_s.push_back(seconds_since(t1));
    save_s.push_back(seconds_since(t0));
    t1 = std::chrono::steady_clock::now();
    lf::prune_checkpoints(root, 2);
    prune_s.push_back(seconds_since(t1));
    write_s.push_back(seconds_since(t0));

    bytes = 0;
    for (const auto& f : lf::read_commit_marker(published).files) bytes += f.size;
    bytes += fs::file_size(fs::path(published) / lf::kCheckpointMarkerFile);

    t0 = std::chrono::steady_clock::now();
    const std::string resolved = lf::resolve_checkpoint(root);
    const lf::TrainState loaded = lf::load_train_state(resolved);
    const lf::LoadedTensors weights = lf::load_safetensors(resolved + "/lora.safetensors");
    const auto rng = lf::load_rng_state(resolved, 0);
    read_s.push_back(seconds_since(t0));
    if (resolved != published || loaded.optimizer.size() != optimizer.size() ||
        weights.tensors.size() != lora.size() || !rng) {
      std::fprintf(stderr, "read back %s does not match what was written\n", resolved.c_str());
      return 1;
    }

    t0 = std::chrono::steady_clock::now();
    if (auto torn = lf::checkpoint_torn_reason(resolved, lf::CheckpointCheck::kSizesAndHash)) {
      std::fprintf(stderr, "%s: %s\n", resolved.c_str(), torn->c_str());
      return 1;
    }
    verify_s.push_back(seconds_since(t0));
  }
  const double w = median(write_s), sv = median(save_s), rd = median(read_s);
  std::printf(
      "{\"bytes\": %llu, \"tensors\": %zu, \"repeats\": %d, \"rank\": %lld, \"write_s\": %.4f, "
      "\"write_mb_s\": %.1f, \"save_s\": %.4f, \"save_mb_s\": %.1f, \"lora_s\": %.4f, "
      "\"state_s\": %.4f, \"publish_s\": %.4f, \"prune_s\": %.4f, \"read_s\": %.4f, "
      "\"read_mb_s\": %.1f, \"verify_sha256_s\": %.4f, \"write_s_all\": [",
      static_cast<unsigned long long>(bytes), lora.size() + optimizer.size() + 1, repeats,
      static_cast<long long>(rank), w, bytes / 1e6 / w, sv, bytes / 1e6 / sv, median(lora_s),
      median(state_s), median(publish_s), median(prune_s), rd, bytes / 1e6 / rd, median(verify_s));
  for (size_t i = 0; i < write_s.size(); ++i) std::printf("%s%.4f", i ? ", " : "", write_s[i]);
  std::printf("]}\n");
  fs::remove_all(root);
  return 0;
}
