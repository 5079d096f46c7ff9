// `lorafleet-coordinator --inspect`: what a job will train on, without loading a model or
// starting the service. Prints what kohya sd-scripts prints at start-up (train_network.py:
// "number of train images (including repeats)", the bucket lines "bucket N: resolution (w, h),
// count: n" with N the index in the bucket list and n the samples with repeats, "mean ar error",
// batches per epoch, epochs, total optimization steps) and more: every
// subset with its image count, repeats and options, the regularization selection per epoch, bad
// images skipped, and the steps per epoch for a given world size, batch size and gradient
// accumulation.
#pragma once

#include <string>

#include "common/config/job_config.h"

namespace lf {

struct InspectOptions {
  int world_size = 1;
  int batch_size = 0;                   // > 0 overrides every dataset's batch_size (per rank)
  int gradient_accumulation_steps = 0;  // > 0 overrides training.gradient_accumulation_steps
  int epochs_listed = 3;                // epochs whose reg selection is listed in full
};

// Scans the dataset (every image is decoded, as at start-up) and returns the report text.
// Throws ConfigError / DatasetError / std::invalid_argument like the coordinator's start-up,
// naming the file or key.
std::string inspect_job(JobConfig config, const InspectOptions& options);

}  // namespace lf
