// Autocast scope over ATen's thread-local autocast flags (see header).
#include "train/autocast.h"

#include <ATen/autocast_mode.h>

namespace lf {

AutocastState autocast_state(c10::DeviceType device_type) {
  return {at::autocast::is_autocast_enabled(device_type),
          at::autocast::get_autocast_dtype(device_type)};
}

AutocastScope::AutocastScope(c10::DeviceType device_type, at::ScalarType dtype, bool enabled)
    : device_type_(device_type), active_(enabled), previous_(autocast_state(device_type)) {
  if (!active_) return;
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_.enabled);
  at::autocast::set_autocast_dtype(device_type_, previous_.dtype);
}

}  // namespace lf
