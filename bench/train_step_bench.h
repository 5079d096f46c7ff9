// Benchmark of LoRA training steps (forward, MSE loss, backward, AdamW) on a preset's UNet,
// built from the same lf_train_core pieces the worker uses. Prints one JSON line in the schema
// bench/peer_diffusers_train_step.py prints too, so the two are compared as a ratio.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lf {

struct TrainStepBenchOptions {
  std::string preset = "tiny";  // a model_preset() name
  int64_t batch = 2;
  int64_t latent_h = 32;
  int64_t latent_w = 32;
  int64_t context_len = 77;
  int64_t network_dim = 4;
  double network_alpha = 0.0;   // <= 0: alpha = network_dim (scale 1)
  std::string device = "cpu";   // "cpu", "cuda" or "cuda:N"
  std::string dtype = "fp32";   // "fp32" | "bf16" (UNet weights and inputs; LoRA stays fp32)
  bool autocast = false;        // bf16 autocast around compute_loss_sum (accelerate "bf16")
  bool gradient_checkpointing = false;  // kohya --gradient_checkpointing
  double memory_cap_gb = 0.0;   // CUDA: cap the caching allocator at this many GiB (0: none)
  double vram_budget_gb = 0.0;  // CUDA: worker.vram_budget_gb (stream UNet blocks; 0: none)
  int offload_streams = 2;      // worker.offload_streams
  int64_t warmup = 3;           // untimed steps first
  int64_t steps = 30;           // timed steps
  int threads = 1;              // intra-op CPU threads
  uint64_t seed = 1234;
  double lr = 1e-4;
};

// Parses the command line (argv[0] skipped) into `options`; --autocast and
// --gradient-checkpointing are the flags without a value. Returns false when --help was given (the caller prints train_step_bench_usage()).
// Throws std::invalid_argument naming the offending flag or value.
bool parse_train_step_bench_args(int argc, const char* const* argv,
                                 TrainStepBenchOptions& options);

std::string train_step_bench_usage();

struct TrainStepBenchResult {
  std::vector<double> step_seconds;  // one per timed step, in order
  double median_step_s = 0.0;
  double mean_step_s = 0.0;
  double min_step_s = 0.0;
  double peak_mem_mib = 0.0;         // CUDA: caching allocator max allocated; CPU: ru_maxrss
  std::string peak_mem_kind;         // "cuda_max_allocated" | "ru_maxrss"
  double rss_before_model_mib = 0.0; // ru_maxrss before the model was built (process baseline)
  double mem_after_setup_mib = 0.0;  // CUDA allocated / ru_maxrss once model and LoRA are set
  int64_t streamed_blocks = 0;       // --vram-budget-gb: UNet blocks streamed
  double setup_s = 0.0;              // model construction + LoRA attach + moves
  int64_t unet_params = 0;
  int64_t lora_params = 0;
  int64_t lora_modules = 0;
  double final_loss = 0.0;           // mean-over-batch loss of the last step
};

// Builds the preset's UNet (torch default init, seeded), moves it to the device and dtype,
// attaches a LoRANetwork (rank network_dim), and runs warmup + steps training steps on fixed
// random latents [B, 4, h, w] and context [B, context_len, context_dim]. Each step draws noise
// and timesteps with compute_loss_sum, divides by B, calls backward, LoRAOptimizer::step and
// zero_grad; on CUDA it synchronizes before the clock stops. With `autocast`, compute_loss_sum
// (noise, UNet forward, fp32 loss) runs under bf16 autocast for the device; backward and the
// optimizer step run outside it. Throws std::invalid_argument for bad options,
// std::runtime_error when CUDA is asked for but unavailable.
TrainStepBenchResult run_train_step_bench(const TrainStepBenchOptions& options);

// {"impl": "lorafleet", ...options, ...result} as one line without a trailing newline.
std::string train_step_bench_json(const TrainStepBenchOptions& options,
                                  const TrainStepBenchResult& result);

}  // namespace lf
