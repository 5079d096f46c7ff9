// Precision of a run and its device checks (see header).
#include "worker/train/run_precision.h"

#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "common/util/log.h"
#include "worker/core/device/cuda_info.h"

namespace lf {
namespace {

[[noreturn]] void refuse(const JobConfig& config, const std::string& key,
                         const std::string& problem) {
  throw ConfigError(config.source_name + ": key '" + key + "': " + problem);
}

bool cpu_fp16_allowed() {
  const char* v = std::getenv("LF_ALLOW_CPU_FP16");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace

Precision precision_of(const JobConfig& config) {
  PrecisionOptions o;
  o.mixed_precision = config.training.mixed_precision;
  o.full_fp16 = config.training.full_fp16;
  o.full_bf16 = config.training.full_bf16;
  o.vae_dtype = config.model.vae_dtype;
  o.fp8_base = config.model.fp8_base;
  return resolve_precision(o);
}

void check_device_support(const JobConfig& config, const Precision& p, at::Device device) {
  const std::string where = device.str();
  if (!device.is_cuda()) {
    if (config.worker.vram_budget_gb > 0) {
      refuse(config, "worker.vram_budget_gb",
             "expected 0 on the CPU (this rank trains on " + where +
                 "; the budget streams UNet weights to a GPU)");
    }
    if (!cpu_fp16_allowed()) {
      if (p.weight_dtype == at::kHalf) {
        refuse(config, "training.mixed_precision",
               "fp16 needs a CUDA device (this rank trains on " + where +
                   ", which only emulates fp16; accelerate refuses it too): use bf16");
      }
      if (p.vae_dtype == at::kHalf) {
        refuse(config, "model.vae_dtype",
               "fp16 needs a CUDA device (this rank trains on " + where + "): use fp32 or bf16");
      }
    }
  } else if (p.weight_dtype == at::kBFloat16 || p.vae_dtype == at::kBFloat16) {
    const int cc = cuda_compute_capability(device.index());
    if (cc >= 0 && cc < 80) {
      refuse(config, p.weight_dtype == at::kBFloat16 ? "training.mixed_precision" : "model.vae_dtype",
             "bf16 needs a GPU of compute capability 8.0 or newer (" + where + " has " +
                 std::to_string(cc / 10) + "." + std::to_string(cc % 10) + "): use fp16");
    }
  }
  if (p.unet_matrix_dtype == at::kFloat8_e4m3fn) {
    try {
      torch::NoGradGuard no_grad;
      const auto on = torch::TensorOptions().device(device).dtype(p.weight_dtype);
      const at::Tensor w = torch::ones({4, 4}, on).to(at::kFloat8_e4m3fn);
      const at::Tensor back = w.to(p.weight_dtype);
      if (!torch::equal(back.cpu(), torch::ones({4, 4}, torch::dtype(p.weight_dtype)))) {
        throw std::runtime_error("float8 round trip changed the values");
      }
    } catch (const std::exception& e) {
      refuse(config, "model.fp8_base",
             "expected a device that stores float8_e4m3fn weights; " + where + " cannot (" +
                 std::string(e.what()).substr(0, 200) + ")");
    }
  }
}

void apply_determinism(const JobConfig& config, at::Device device) {
  if (!config.training.deterministic || !device.is_cuda()) return;
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  auto& ctx = at::globalContext();
  // Strict, as diffusers' enable_full_determinism: only then does the memory-efficient
  // attention backward take its deterministic path.
  ctx.setDeterministicAlgorithms(true, /*warn_only=*/false);
  ctx.setDeterministicCuDNN(true);
  ctx.setBenchmarkCuDNN(false);
  ctx.setSDPUseFlash(false);
  ctx.setSDPUseCuDNN(false);
}

}  // namespace lf
