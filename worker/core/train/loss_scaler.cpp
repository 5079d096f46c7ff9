// GradScaler's update rule in float32 (see header).
#include "train/loss_scaler.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace lf {

LossScaler::LossScaler(const LossScalerOptions& options)
    : options_(options), scale_(static_cast<float>(options.init_scale)) {
  if (!(options.init_scale > 0) || !(options.growth_factor > 1) ||
      !(options.backoff_factor > 0 && options.backoff_factor < 1) ||
      options.growth_interval < 1) {
    throw std::invalid_argument(
        "LossScaler: expected init_scale > 0, growth_factor > 1, backoff_factor in (0, 1) and "
        "growth_interval >= 1");
  }
}

double LossScaler::inverse_scale() const {
  return static_cast<float>(1.0 / static_cast<double>(scale_));
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ = scale_ * static_cast<float>(options_.backoff_factor);
    growth_tracker_ = 0;
    return;
  }
  const std::int64_t successful = growth_tracker_ + 1;
  if (successful == options_.growth_interval) {
    const float grown = scale_ * static_cast<float>(options_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  } else {
    growth_tracker_ = successful;
  }
}

void LossScaler::restore(double scale, std::int64_t growth_tracker) {
  if (!(scale > 0) || !std::isfinite(scale) || growth_tracker < 0) {
    throw std::invalid_argument("LossScaler: cannot restore scale " + std::to_string(scale) +
                                " with growth tracker " + std::to_string(growth_tracker));
  }
  scale_ = static_cast<float>(scale);
  growth_tracker_ = growth_tracker;
}

}  // namespace lf
