// A job's precision keys turned into the dtypes of the run (worker/core/train/precision.h), and
// what they ask of the device this rank trains on, checked before any model loads: each refusal
// is a ConfigError (exit 3) naming the key and what is expected.
#pragma once

#include <c10/core/Device.h>

#include "common/config/job_config.h"
#include "worker/core/train/precision.h"

namespace lf {

// training.mixed_precision / full_fp16 / full_bf16, model.vae_dtype / fp8_base.
Precision precision_of(const JobConfig& config);

// Throws ConfigError when the device cannot do what the config asks:
//  - fp16 (training.mixed_precision, model.vae_dtype) on the CPU: accelerate refuses it ("fp16
//    mixed precision requires a GPU"), the CPU only emulates it; bf16 is the CPU's half type.
//    LF_ALLOW_CPU_FP16=1 lifts this, for testing the fp16 path (loss scaling) on CPU machines;
//  - bf16 on a CUDA device older than compute capability 8.0 (no bf16 tensor cores);
//  - model.fp8_base where the device cannot store and upcast float8_e4m3fn tensors;
//  - worker.vram_budget_gb > 0 on the CPU (it streams UNet weights to a GPU).
void check_device_support(const JobConfig& config, const Precision& precision, at::Device device);

// training.deterministic on a CUDA device: LibTorch's deterministic-algorithms mode, strict as
// diffusers' enable_full_determinism (an op without a deterministic CUDA kernel stops the run
// with LibTorch's error naming it), cuDNN deterministic without autotuning, neither flash nor
// cuDNN attention (their backwards are not deterministic) and CUBLAS_WORKSPACE_CONFIG=:4096:8
// unless the environment sets it. Call before the
// first CUDA matmul. On the CPU, whose kernels are deterministic already, and without the key,
// nothing is changed (the CPU results stay the same bytes either way).
void apply_determinism(const JobConfig& config, at::Device device);

}  // namespace lf
