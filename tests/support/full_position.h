// A train position with every field set away from its default, for round-trip tests: a field
// that did not round-trip shows in a whole-position comparison (train_position_metadata, or
// TrainPosition's operator==).
#pragma once

#include <cstdint>
#include <string>

#include "common/checkpoint/train_position.h"

namespace lf::test_support {

inline TrainPosition full_position(std::int64_t global_step = 1234) {
  TrainPosition p;
  p.global_step = global_step;
  p.epoch = 3;
  p.step_in_epoch = 17;
  p.samples_in_epoch = 68;
  p.shared_seed = 18446744073709551557ull;  // above INT64_MAX
  p.world_size = 4;
  p.session_id = 99;
  p.training_started_at = 1764450000.125;
  p.reg_cursor = {10, 0};
  p.gradient_accumulation_steps = 3;
  p.batch_sizes = {2, 1};
  p.optimizer_type = "Prodigy";
  p.plan_epoch = 2;
  p.plan_digest = std::string(64, 'f');
  p.plan_lineage = {{2, 10}, {4, 7}};  // 17 batches: 10 on 2 ranks, then 7 on 4
  p.loss_scale = 32768.0;
  p.loss_scale_growth_tracker = 3;
  p.skipped_steps = 1;
  return p;
}

}  // namespace lf::test_support
