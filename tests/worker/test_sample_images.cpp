// Sample images' cadence (kohya sample_images_common) and the sampler names the config, the
// prompt files and the core agree on.
#include <gtest/gtest.h>

#include <string>

#include "common/config/job_config.h"
#include "common/config/sample_prompts.h"
#include "worker/core/sample/sigma_schedule.h"
#include "worker/train/sample_images.h"

namespace lf {
namespace {

JobConfig config_with(const std::string& output) {
  JobConfig c = parse_job_config(
      "model:\n  pretrained_model_name_or_path: base.safetensors\n"
      "dataset:\n  train_data_dir: data\n"
      "output:\n  sample_prompts: p.txt\n" +
          output,
      "job.yaml");
  c.sample_prompts_text = "a cat --s 3\na dog --ss euler_a\n";
  return c;
}

TEST(SampleImages, KohyasCadence) {
  const JobConfig steps = config_with("  sample_every_n_steps: 3\n  sample_at_first: true\n");
  const SampleImages s(steps);
  ASSERT_EQ(s.prompts().size(), 2u);
  EXPECT_EQ(s.prompts()[1].sampler, "euler_a");
  EXPECT_TRUE(s.due_at_start(0));
  EXPECT_FALSE(s.due_at_start(5));  // a resumed run does not sample at first
  EXPECT_FALSE(s.due_after_step(2));
  EXPECT_TRUE(s.due_after_step(3));
  EXPECT_TRUE(s.due_after_step(6));
  EXPECT_FALSE(s.due_after_epoch(1));

  // sample_every_n_epochs set: sample_every_n_steps is ignored (kohya).
  const JobConfig epochs = config_with("  sample_every_n_steps: 1\n  sample_every_n_epochs: 2\n");
  const SampleImages e(epochs);
  EXPECT_FALSE(e.due_after_step(1));
  EXPECT_FALSE(e.due_after_epoch(1));
  EXPECT_TRUE(e.due_after_epoch(2));
  EXPECT_FALSE(e.due_at_start(0));

  JobConfig off = config_with("");
  off.sample_prompts_text.clear();
  EXPECT_FALSE(SampleImages(off).enabled());
}

TEST(SampleImages, CadenceWithoutPromptsIsAConfigError) {
  try {
    parse_job_config(
        "model:\n  pretrained_model_name_or_path: base.safetensors\n"
        "dataset:\n  train_data_dir: data\n"
        "output:\n  sample_every_n_steps: 10\n",
        "job.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("job.yaml:6: key 'output.sample_every_n_steps'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(config_with("  sample_sampler: euler_a\n  sample_use_karras_sigmas: true\n"),
               ConfigError);
  EXPECT_THROW(config_with("  sample_sampler: plms\n"), ConfigError);
}

TEST(SampleImages, OneListOfSamplerNames) {
  EXPECT_EQ(sample_sampler_names(), sampler_names());
  for (const std::string& name : sampler_names()) {
    EXPECT_NO_THROW(config_with("  sample_sampler: " + name + "\n")) << name;
  }
}

}  // namespace
}  // namespace lf
