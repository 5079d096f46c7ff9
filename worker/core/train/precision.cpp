// Precision of a run (see header).
#include "train/precision.h"

#include <stdexcept>

namespace lf {

at::ScalarType dtype_from_name(const std::string& name) {
  if (name == "fp32" || name == "float") return at::kFloat;
  if (name == "fp16") return at::kHalf;
  if (name == "bf16") return at::kBFloat16;
  throw std::invalid_argument("unknown dtype '" + name + "' (expected fp32, fp16 or bf16)");
}

std::string dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "fp32";
    case at::kHalf: return "fp16";
    case at::kBFloat16: return "bf16";
    case at::kFloat8_e4m3fn: return "fp8_e4m3fn";
    default: return c10::toString(dtype);
  }
}

std::string Precision::describe() const {
  std::string s = (weight_dtype == at::kFloat ? "no" : dtype_name(weight_dtype)) +
                  std::string(" (weights ") + dtype_name(weight_dtype);
  if (unet_matrix_dtype != weight_dtype) s += ", UNet matrices " + dtype_name(unet_matrix_dtype);
  s += ", LoRA " + dtype_name(lora_dtype) + ", VAE " + dtype_name(vae_dtype);
  if (autocast) s += ", autocast";
  if (loss_scaling) s += ", loss scaling";
  return s + ")";
}

Precision resolve_precision(const PrecisionOptions& o) {
  if (o.mixed_precision != "no" && o.mixed_precision != "fp16" && o.mixed_precision != "bf16") {
    throw std::invalid_argument("mixed_precision '" + o.mixed_precision +
                                "' (expected no, fp16 or bf16)");
  }
  if (o.full_fp16 && o.full_bf16) throw std::invalid_argument("full_fp16 and full_bf16 together");
  if (o.full_fp16 && o.mixed_precision != "fp16") {
    throw std::invalid_argument("full_fp16 requires mixed_precision fp16");
  }
  if (o.full_bf16 && o.mixed_precision != "bf16") {
    throw std::invalid_argument("full_bf16 requires mixed_precision bf16");
  }
  if (o.fp8_base && o.mixed_precision == "no") {
    throw std::invalid_argument("fp8_base requires mixed_precision fp16 or bf16");
  }
  Precision p;
  p.weight_dtype = o.mixed_precision == "no" ? at::kFloat : dtype_from_name(o.mixed_precision);
  p.unet_matrix_dtype = o.fp8_base ? at::kFloat8_e4m3fn : p.weight_dtype;
  p.vae_dtype = dtype_from_name(o.vae_dtype);
  p.lora_dtype = (o.full_fp16 || o.full_bf16) ? p.weight_dtype : at::kFloat;
  p.autocast = p.half();
  p.loss_scaling = p.weight_dtype == at::kHalf;
  return p;
}

}  // namespace lf
