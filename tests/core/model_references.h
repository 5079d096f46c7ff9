// Golden values for the SD 2.x / SDXL model tests, generated from diffusers / transformers by
// reference/make_model_references.py (see that script for what each array holds).
#pragma once

#include <array>
#include <cstdint>

namespace lf::ref {
#include "reference/model_references.inc"
}  // namespace lf::ref
