// Autocast regions from C++, as torch.autocast(device_type, dtype) is in Python: ops with an
// autocast policy (linear, conv, matmul, attention, ...) run in `dtype` while in scope. The
// training step wraps its forward passes in one (kohya's accelerator.autocast()); backward and
// the optimizer step run outside it.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace lf {

// One device type's autocast flags, read with autocast_state() and re-entered by a scope (a
// gradient-checkpoint recompute runs in backward, outside the forward's region).
struct AutocastState {
  bool enabled = false;
  at::ScalarType dtype = at::kBFloat16;
};

// The current thread's autocast state for `device_type` (kCPU or kCUDA).
AutocastState autocast_state(c10::DeviceType device_type);

class AutocastScope {
 public:
  // enabled false makes the scope a no-op. Otherwise sets autocast on for `device_type` with
  // `dtype` (kBFloat16 or kHalf); on exit restores the previous flag and dtype and, when the
  // outermost region ends, clears the cast cache (its half copies of fp32 LoRA weights go stale
  // at the optimizer step), as torch.autocast.__exit__ does.
  AutocastScope(c10::DeviceType device_type, at::ScalarType dtype, bool enabled = true);
  explicit AutocastScope(c10::DeviceType device_type, const AutocastState& state)
      : AutocastScope(device_type, state.dtype, state.enabled) {}
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool active_;
  AutocastState previous_;
};

}  // namespace lf
