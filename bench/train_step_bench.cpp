// LoRA training-step benchmark on lf_train_core: option parsing, the timed loop (the same
// compute_loss_sum / backward / LoRAOptimizer sequence as the worker's step) and the JSON line.
// The peer measurement is bench/peer_diffusers_train_step.py; bench/README.md has the figures.
#include "train_step_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "device/cuda_info.h"
#include "lora/lora_network.h"
#include "model/model_config.h"
#include "model/unet.h"
#include "offload/unet_streaming.h"
#include "train/autocast.h"
#include "train/grad_clip.h"
#include "train/noise_schedule.h"
#include "train/optim/adamw.h"
#include "train/seeding.h"
#include "train/train_step.h"

namespace lf {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

int64_t parse_int(const std::string& flag, const std::string& value, int64_t min_value) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || v < min_value) {
    throw std::invalid_argument(flag + ": expected an integer >= " + std::to_string(min_value) +
                                ", got \"" + value + "\"");
  }
  return v;
}

double parse_double(const std::string& flag, const std::string& value) {
  size_t used = 0;
  double v = 0.0;
  try {
    v = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty()) {
    throw std::invalid_argument(flag + ": expected a number, got \"" + value + "\"");
  }
  return v;
}

// ru_maxrss of this process in MiB (Linux reports KiB).
double max_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0 / kMiB;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string json_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

std::string train_step_bench_usage() {
  return "usage: lorafleet-bench-train-step [--preset tiny|sd15] [--batch B] [--latent HxW]\n"
         "         [--network-dim R] [--network-alpha A] [--device cpu|cuda[:N]]\n"
         "         [--dtype fp32|bf16] [--warmup N] [--steps N] [--threads T] [--seed S]\n"
         "         [--lr LR] [--autocast] [--gradient-checkpointing] [--memory-cap-gb G]\n"
         "         [--vram-budget-gb G] [--offload-streams N]\n"
         "Times LoRA training steps (forward, MSE, backward, AdamW) of the preset's UNet and\n"
         "prints one JSON line. Defaults: tiny, batch 2, latent 32x32, R 4, alpha = R, cpu,\n"
         "fp32, warmup 3, steps 30, 1 thread, seed 1234, lr 1e-4; context length 77.\n"
         "--autocast runs noise, UNet forward and loss under bf16 autocast for the device\n"
         "(accelerate mixed_precision=\"bf16\"); the loss itself stays fp32.\n"
         "--memory-cap-gb caps the CUDA caching allocator; --vram-budget-gb streams UNet\n"
         "blocks within that budget (worker.vram_budget_gb; needs --gradient-checkpointing).\n";
}

bool parse_train_step_bench_args(int argc, const char* const* argv,
                                 TrainStepBenchOptions& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return false;
    if (flag == "--autocast") {
      options.autocast = true;
      continue;
    }
    if (flag == "--gradient-checkpointing") {
      options.gradient_checkpointing = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + ": missing value (or unknown flag)");
    const std::string value = argv[++i];
    if (flag == "--preset") {
      model_preset(value);  // validates the name
      options.preset = value;
    } else if (flag == "--batch") {
      options.batch = parse_int(flag, value, 1);
    } else if (flag == "--latent") {
      const size_t x = value.find('x');
      if (x == std::string::npos) {
        throw std::invalid_argument("--latent: expected HxW, got \"" + value + "\"");
      }
      options.latent_h = parse_int(flag, value.substr(0, x), 1);
      options.latent_w = parse_int(flag, value.substr(x + 1), 1);
    } else if (flag == "--network-dim") {
      options.network_dim = parse_int(flag, value, 1);
    } else if (flag == "--network-alpha") {
      options.network_alpha = parse_double(flag, value);
    } else if (flag == "--device") {
      if (value != "cpu" && value.rfind("cuda", 0) != 0) {
        throw std::invalid_argument("--device: expected cpu or cuda[:N], got \"" + value + "\"");
      }
      options.device = value;
    } else if (flag == "--dtype") {
      if (value != "fp32" && value != "bf16") {
        throw std::invalid_argument("--dtype: expected fp32 or bf16, got \"" + value + "\"");
      }
      options.dtype = value;
    } else if (flag == "--warmup") {
      options.warmup = parse_int(flag, value, 0);
    } else if (flag == "--steps") {
      options.steps = parse_int(flag, value, 1);
    } else if (flag == "--threads") {
      options.threads = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--seed") {
      options.seed = static_cast<uint64_t>(parse_int(flag, value, 0));
    } else if (flag == "--lr") {
      options.lr = parse_double(flag, value);
    } else if (flag == "--memory-cap-gb") {
      options.memory_cap_gb = parse_double(flag, value);
    } else if (flag == "--vram-budget-gb") {
      options.vram_budget_gb = parse_double(flag, value);
    } else if (flag == "--offload-streams") {
      options.offload_streams = static_cast<int>(parse_int(flag, value, 1));
    } else {
      throw std::invalid_argument("unknown flag " + flag);
    }
  }
  return true;
}

TrainStepBenchResult run_train_step_bench(const TrainStepBenchOptions& options) {
  using clock = std::chrono::steady_clock;
  TrainStepBenchResult result;
  const ModelPreset preset = model_preset(options.preset);
  const torch::Device device(options.device);
  const bool cuda = device.is_cuda();
  if (cuda && !torch::cuda::is_available()) {
    throw std::runtime_error("--device " + options.device + ": CUDA is not available");
  }
  const auto dtype = options.dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32;
  torch::set_num_threads(options.threads);
  result.rss_before_model_mib = max_rss_mib();

  const auto setup_start = clock::now();
  const int cuda_index = device.has_index() ? device.index() : 0;
  if (cuda && options.memory_cap_gb > 0) {
    // As torch.cuda.set_per_process_memory_fraction: a card of that size, as far as we go.
    const double total = static_cast<double>(cuda_total_memory(cuda_index));
    set_cuda_memory_fraction(std::min(1.0, options.memory_cap_gb * kGiB / total), cuda_index);
  }
  torch::manual_seed(options.seed);  // the UNet's default init uses the global generator
  UNetModel unet(preset.unet);
  unet->to(device, dtype);
  if (options.gradient_checkpointing) unet->set_gradient_checkpointing(true);
  at::Generator lora_gen = make_cpu_generator(mix_seed(options.seed, 1, 0));
  LoRANetwork network(unet, options.network_dim, options.network_alpha, lora_gen);
  AdamWOptimizer optimizer(network.parameters(), AdamWOptions{});
  DDPMNoiseSchedule schedule;

  at::Generator input_gen = make_cpu_generator(mix_seed(options.seed, 2, 0));
  StepInputs inputs;
  const int64_t b = options.batch;
  inputs.latents = torch::randn({b, preset.unet.in_channels, options.latent_h, options.latent_w},
                                input_gen, torch::dtype(torch::kFloat32))
                       .to(device, dtype);
  inputs.context = torch::randn({b, options.context_len, preset.unet.context_dim}, input_gen,
                                torch::dtype(torch::kFloat32))
                       .to(device, dtype);
  if (preset.unet.adm_in_channels > 0) {  // SDXL: a vector conditioning of the right width
    inputs.vector_cond = torch::randn({b, preset.unet.adm_in_channels}, input_gen,
                                      torch::dtype(torch::kFloat32))
                             .to(device, dtype);
  }
  inputs.loss_weights = torch::ones({b}, torch::dtype(torch::kFloat32)).to(device);
  // One training step's forward, loss and backward (the optimizer step is the caller's).
  auto forward_backward = [&](at::Generator& gen) {
    torch::Tensor loss;
    {
      // The region Python's peer wraps in torch.autocast; backward and step stay outside.
      AutocastScope amp(device.type(), at::kBFloat16, options.autocast);
      loss = compute_loss_sum(unet, schedule, inputs, gen) / static_cast<double>(b);
    }
    loss.backward();
    return loss;
  };
  std::unique_ptr<WeightStreamer> streamer;
  if (options.vram_budget_gb > 0) {
    if (!cuda || !options.gradient_checkpointing) {
      throw std::invalid_argument("--vram-budget-gb needs --device cuda and "
                                  "--gradient-checkpointing");
    }
    UNetStreamingOptions so;
    so.budget_bytes = static_cast<std::int64_t>(options.vram_budget_gb * kGiB);
    so.reserved_bytes = 3 * static_cast<std::int64_t>(network.num_parameters()) * 4;
    so.streams = options.offload_streams;
    so.compute_dtype = options.autocast ? at::kBFloat16 : dtype;
    so.device = device;
    UNetStreamingReport report;
    streamer = stream_unet_within_budget(
        unet, so,
        [&] {
          at::Generator probe = make_cpu_generator(0);
          forward_backward(probe);
          optimizer.zero_grad();
        },
        &report);
    result.streamed_blocks = static_cast<int64_t>(report.streamed);
  }
  if (cuda) torch::cuda::synchronize();
  result.setup_s = std::chrono::duration<double>(clock::now() - setup_start).count();
  result.mem_after_setup_mib =
      cuda ? static_cast<double>(cuda_memory_stats(cuda_index).allocated_bytes) / kMiB
           : max_rss_mib();

  for (const auto& p : unet->parameters()) result.unet_params += p.numel();
  result.lora_params = static_cast<int64_t>(network.num_parameters());
  result.lora_modules = static_cast<int64_t>(network.module_names().size());

  if (options.autocast) {
    // A silent no-op autocast would time an fp32/bf16-weights step under an "autocast" label,
    // so check that a linear of fp32 operands comes out bf16 inside the scope.
    AutocastScope amp(device.type(), at::kBFloat16);
    const auto f32 = torch::dtype(torch::kFloat32).device(device);
    const torch::Tensor probe = at::linear(torch::ones({1, 8}, f32), torch::ones({8, 8}, f32));
    if (probe.scalar_type() != torch::kBFloat16) {
      throw std::runtime_error("--autocast: a linear under bf16 autocast returned " +
                               std::string(c10::toString(probe.scalar_type())));
    }
  }

  unet->train();
  torch::Tensor loss;
  for (int64_t step = 0; step < options.warmup + options.steps; ++step) {
    const auto start = clock::now();
    at::Generator gen = make_cpu_generator(mix_seed(options.seed, 0, static_cast<uint64_t>(step)));
    loss = forward_backward(gen);
    optimizer.step(options.lr);
    optimizer.zero_grad();
    if (cuda) torch::cuda::synchronize();
    const double seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (step >= options.warmup) result.step_seconds.push_back(seconds);
  }
  result.final_loss = loss.item<double>();

  std::vector<double> sorted = result.step_seconds;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  result.median_step_s = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  result.mean_step_s = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;
  result.min_step_s = sorted.front();
  if (cuda) {
    if (!cuda_support_compiled()) {
      throw std::runtime_error("this build has no c10_cuda memory statistics");
    }
    const int index = device.has_index() ? device.index() : 0;
    result.peak_mem_mib = static_cast<double>(cuda_memory_stats(index).peak_allocated_bytes) / kMiB;
    result.peak_mem_kind = "cuda_max_allocated";
  } else {
    result.peak_mem_mib = max_rss_mib();
    result.peak_mem_kind = "ru_maxrss";
  }
  return result;
}

std::string train_step_bench_json(const TrainStepBenchOptions& o, const TrainStepBenchResult& r) {
  const double alpha = o.network_alpha > 0 ? o.network_alpha : static_cast<double>(o.network_dim);
  std::ostringstream s;
  s << "{\"impl\": \"lorafleet\", \"torch\": " << json_string(TORCH_VERSION)
    << ", \"preset\": " << json_string(o.preset) << ", \"device\": " << json_string(o.device)
    << ", \"dtype\": " << json_string(o.dtype)
    << ", \"autocast\": " << (o.autocast ? "true" : "false")
    << ", \"gradient_checkpointing\": " << (o.gradient_checkpointing ? "true" : "false")
    << ", \"memory_cap_gb\": " << json_number(o.memory_cap_gb)
    << ", \"vram_budget_gb\": " << json_number(o.vram_budget_gb)
    << ", \"streamed_blocks\": " << r.streamed_blocks << ", \"batch\": " << o.batch
    << ", \"latent\": \"" << o.latent_h << "x" << o.latent_w << "\""
    << ", \"context_len\": " << o.context_len << ", \"network_dim\": " << o.network_dim
    << ", \"network_alpha\": " << json_number(alpha) << ", \"threads\": " << o.threads
    << ", \"warmup\": " << o.warmup << ", \"steps\": " << o.steps
    << ", \"unet_params\": " << r.unet_params << ", \"lora_params\": " << r.lora_params
    << ", \"lora_modules\": " << r.lora_modules
    << ", \"median_step_s\": " << json_number(r.median_step_s)
    << ", \"mean_step_s\": " << json_number(r.mean_step_s)
    << ", \"min_step_s\": " << json_number(r.min_step_s)
    << ", \"steps_per_s\": " << json_number(1.0 / r.median_step_s)
    << ", \"samples_per_s\": " << json_number(static_cast<double>(o.batch) / r.median_step_s)
    << ", \"peak_mem_mib\": " << json_number(r.peak_mem_mib)
    << ", \"peak_mem_kind\": " << json_string(r.peak_mem_kind)
    << ", \"rss_before_model_mib\": " << json_number(r.rss_before_model_mib)
    << ", \"mem_after_setup_mib\": " << json_number(r.mem_after_setup_mib)
    << ", \"setup_s\": " << json_number(r.setup_s)
    << ", \"final_loss\": " << json_number(r.final_loss) << "}";
  return s.str();
}

}  // namespace lf
