// Dynamic loss scaling for fp16 training, with torch.amp.GradScaler's defaults and update rule
// (torch/amp/grad_scaler.py, ATen _amp_update_scale_): the loss is multiplied by `scale` before
// backward so small fp16 gradients do not flush to zero; a step whose gradients hold Inf or NaN
// is skipped and the scale backs off, and after growth_interval clean steps in a row it grows.
// The scale is held in float32 as GradScaler's tensor is; the state round-trips exactly through
// a checkpoint.
#pragma once

#include <cstdint>

namespace lf {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  // Throws std::invalid_argument for init_scale <= 0, growth_factor <= 1, backoff_factor
  // outside (0, 1) or growth_interval < 1 (GradScaler's own checks).
  explicit LossScaler(const LossScalerOptions& options = {});

  // The current scale (float32 value) and 1 / scale computed in float64 and rounded to float32,
  // as GradScaler.unscale_ does.
  double scale() const { return scale_; }
  double inverse_scale() const;
  // Clean steps since the last growth or backoff.
  std::int64_t growth_tracker() const { return growth_tracker_; }

  // After a step: found_inf -> scale * backoff_factor, tracker 0; else tracker + 1, and when it
  // reaches growth_interval, scale * growth_factor (kept only if finite) and tracker 0.
  void update(bool found_inf);

  // Restores a saved state (scale > 0, tracker >= 0); throws std::invalid_argument otherwise.
  void restore(double scale, std::int64_t growth_tracker);

 private:
  LossScalerOptions options_;
  float scale_;
  std::int64_t growth_tracker_ = 0;
};

}  // namespace lf
