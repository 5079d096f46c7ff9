// Golden values for the core tests, generated from diffusers / transformers / torch by
// reference/make_core_references.py (see that script for what each array holds).
#pragma once

#include <array>
#include <cstdint>

namespace lf::ref {
#include "reference/core_references.inc"
}  // namespace lf::ref
