// The dtypes of one training run, from kohya's precision options: mixed_precision (no, fp16,
// bf16) gives the frozen models' weight_dtype and turns autocast on, full_fp16 / full_bf16 put
// the LoRA in that dtype too, vae_dtype is the latent encoder's, fp8_base stores the UNet's
// Linear / Conv weights as float8_e4m3fn. Mirrors kohya train_util.prepare_dtype and the dtype
// set-up of train_network.py (weight_dtype, vae_dtype, unet_weight_dtype).
#pragma once

#include <string>

#include <c10/core/ScalarType.h>

namespace lf {

struct PrecisionOptions {
  std::string mixed_precision = "no";  // no | fp16 | bf16
  bool full_fp16 = false;
  bool full_bf16 = false;
  std::string vae_dtype = "fp32";  // fp32 | fp16 | bf16
  bool fp8_base = false;
};

struct Precision {
  // Frozen UNet (all of it but its LoRA-compatible Linear / Conv weights under fp8_base) and
  // text encoders: kohya's weight_dtype. Also the dtype the latents and noise are cast to.
  at::ScalarType weight_dtype = at::kFloat;
  // The UNet's LoRA-compatible Linear / Conv weights: weight_dtype, or Float8_e4m3fn.
  at::ScalarType unet_matrix_dtype = at::kFloat;
  at::ScalarType vae_dtype = at::kFloat;
  at::ScalarType lora_dtype = at::kFloat;  // LoRA weights, gradients and optimizer state
  bool autocast = false;      // forward passes under autocast to weight_dtype
  bool loss_scaling = false;  // fp16: dynamic loss scaling (LossScaler)

  bool half() const { return weight_dtype != at::kFloat; }
  // "bf16 (weights bf16, LoRA fp32, VAE fp32, autocast)" for the log.
  std::string describe() const;
};

// "fp32" or "float" -> kFloat, "fp16" -> kHalf, "bf16" -> kBFloat16. Throws
// std::invalid_argument naming the value otherwise.
at::ScalarType dtype_from_name(const std::string& name);
// "fp32", "fp16", "bf16", "fp8_e4m3fn" (the names above, for messages).
std::string dtype_name(at::ScalarType dtype);

// Throws std::invalid_argument on kohya's preconditions: full_fp16 needs mixed_precision fp16,
// full_bf16 bf16, not both, fp8_base needs fp16 or bf16; and on unknown names.
Precision resolve_precision(const PrecisionOptions& options);

}  // namespace lf
