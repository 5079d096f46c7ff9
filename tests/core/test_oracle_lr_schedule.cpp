// Every kohya LR schedule against transformers / diffusers (tests/oracle/
// make_lr_schedule_fixture.py, fixture tests/fixtures/oracle/lr_schedules.json): each case's
// kohya arguments are written as the job YAML's training keys, parsed (common/config), turned
// into the core's schedule (worker/train/lr_schedule_setup) and lr_at_step is compared with the
// reference's lr before each of the 1000 optimizer steps and after the last, relative 1e-12.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/config/job_config.h"
#include "worker/core/train/lr_schedule.h"
#include "worker/train/lr_schedule_setup.h"

namespace lf {
namespace {

using nlohmann::json;

json fixture() {
  std::ifstream in(LF_SOURCE_DIR "/tests/fixtures/oracle/lr_schedules.json");
  EXPECT_TRUE(in.is_open()) << "run tests/oracle/regen.sh";
  return json::parse(in);
}

// A YAML scalar for a fixture value: numbers as written, strings single-quoted.
std::string yaml_value(const json& v) {
  if (!v.is_string()) return v.dump();
  std::string s = v.get<std::string>();
  for (std::size_t i = 0; (i = s.find('\'', i)) != std::string::npos; i += 2) s.insert(i, "'");
  return "'" + s + "'";
}

// The case's kohya arguments as a job YAML (each key is lorafleet's of the same name).
std::string job_yaml(const json& args) {
  std::ostringstream y;
  y << "model:\n  pretrained_model_name_or_path: /m.safetensors\n"
    << "dataset:\n  train_data_dir: /d\ntraining:\n";
  for (const auto& [key, value] : args.items()) {
    if (key == "lr_scheduler_args") {
      y << "  lr_scheduler_args:\n";
      for (const json& a : value) y << "    - " << yaml_value(a) << "\n";
    } else if (key == "lr_warmup_steps" || key == "lr_decay_steps") {
      // kohya's command-line form: 100, 0.1 or 10% (a plain YAML scalar).
      y << "  " << key << ": " << (value.is_string() ? value.get<std::string>() : value.dump())
        << "\n";
    } else {
      y << "  " << key << ": " << yaml_value(value) << "\n";
    }
  }
  return y.str();
}

TEST(OracleLRSchedule, EveryKohyaScheduleMatchesTransformersAtEveryStep) {
  const json f = fixture();
  ASSERT_EQ(f.at("cases").size(), 21u);
  std::size_t compared = 0;
  for (const json& c : f.at("cases")) {
    const std::string name = c.at("name");
    const std::string yaml = job_yaml(c.at("args"));
    const JobConfig config = parse_job_config(yaml, name + ".yaml");
    const std::int64_t total = config.training.max_train_steps;
    LRScheduleOptions o = lr_schedule_options(config.training, total);
    o.base_lr = config.training.learning_rate;
    const json& lrs = c.at("lrs");
    ASSERT_EQ(static_cast<std::int64_t>(lrs.size()), total + 1) << name;
    for (std::int64_t s = 0; s <= total; ++s) {
      const double want = lrs[s].get<double>();
      const double got = lr_at_step(o, s);
      ASSERT_NEAR(got, want, 1e-12 * std::abs(want) + 1e-20) << name << " step " << s << "\n"
                                                             << yaml;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 20u * 1001u + 1000u);
}

// The worked case: 1000 steps, cosine, warmup 100, base 1e-4.
TEST(OracleLRSchedule, CosineWithWarmupHitsTheDocumentedValues) {
  const JobConfig config = parse_job_config(
      "model:\n  pretrained_model_name_or_path: /m.safetensors\ndataset:\n  train_data_dir: /d\n"
      "training:\n  learning_rate: 1e-4\n  max_train_steps: 1000\n  lr_scheduler: cosine\n"
      "  lr_warmup_steps: 100\n",
      "job.yaml");
  LRScheduleOptions o = lr_schedule_options(config.training, 1000);
  o.base_lr = 1e-4;
  EXPECT_DOUBLE_EQ(lr_at_step(o, 0), 0.0);  // the first update runs at lr 0
  EXPECT_NEAR(lr_at_step(o, 50), 5e-5, 1e-18);
  EXPECT_NEAR(lr_at_step(o, 100), 1e-4, 1e-18);
  EXPECT_NEAR(lr_at_step(o, 550), 5e-5, 1e-18);
  EXPECT_NEAR(lr_at_step(o, 1000), 0.0, 1e-20);
}

}  // namespace
}  // namespace lf
