// The job a coordinator load test serves: a generated kohya-style dataset (small PNGs of three
// aspect ratios, one bucket each, with tag captions, so that with shuffle_caption every planned
// sample carries its own caption) and a job YAML for lorafleet-coordinator.
// The model file is an empty safetensors header and the vocabulary a placeholder: the
// coordinator only checks that they exist, the simulated workers never load them.
#pragma once

#include <cstdint>
#include <string>

namespace lf::load {

struct LoadJobOptions {
  int images = 4096;            // training images, in one "<num_repeats>_load" folder
  int num_repeats = 4;          // samples per epoch = images x num_repeats
  int batch_size = 1;           // per rank (train_batch_size): a global batch is world_size of them
  bool shuffle_caption = true;  // every planned sample carries its shuffled caption
  int max_train_steps = 100000;  // the coordinator's schedule; the simulation may stop earlier
  // coordinator.worker_timeout_seconds (>= 10, the config's floor): the lease of a silent rank.
  int worker_timeout_seconds = 10;
  // coordinator.linger_seconds: the process stays after the job so its figures can be read.
  int linger_seconds = 60;
  std::uint64_t seed = 1234;  // training.seed (the plan's shuffles)
};

// Writes the dataset under <dir>/train/<num_repeats>_load/ (img-NNNNN.png + .txt), the model
// placeholders and <dir>/job.yaml (output_dir <dir>/out, listen 127.0.0.1:0, metrics
// 127.0.0.1:0); returns the YAML's path. Throws std::runtime_error naming the file that cannot
// be written, std::invalid_argument for images or num_repeats < 1.
std::string write_load_job(const std::string& dir, const LoadJobOptions& options);

}  // namespace lf::load
