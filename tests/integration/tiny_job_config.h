// The tiny training job of the integration tests, without LibTorch or gtest (so the chaos bench
// can use it too): a scratch folder with 3 demo photos x 2 repeats and 2 greyscale reg photos
// plus a tiny base checkpoint, and the job YAML that trains on it. TinyJobTest (tiny_job.h)
// wraps both for gtest fixtures.
#pragma once

#include <string>

namespace lf::test {

// Lays out `dir` (removed first): train/2_photo (astronaut, chelsea, coffee + captions),
// reg/1_grey (camera, coins) from the demo data at `demo_dir`, and base.safetensors written by
// `make_checkpoint_bin` (tiny architecture, seed 7). Returns the checkpoint's path. Throws
// std::runtime_error naming what is missing (the demo data: run scripts/prepare_demo_data.sh)
// or the checkpoint tool's output when it fails.
std::string lay_out_tiny_job(const std::string& dir, const std::string& demo_dir,
                             const std::string& make_checkpoint_bin);

struct TinyJobYaml {
  std::string dir;         // laid out by lay_out_tiny_job
  std::string checkpoint;  // its base.safetensors
  std::string vocab;       // the CLIP BPE vocabulary (.deps/bpe_simple_vocab_16e6.txt.gz)
  std::string output_dir;
  int max_steps = 4;
  int save_every = 0;  // training.save_every_n_steps
  int coord_port = 0;
  int metrics_port = 0;        // the coordinator's /metrics; 0: metrics_address "" (off)
  int worker_port_base = 0;    // worker.metrics_port_base; 0: off
  std::string dataset_extra;   // lines inside dataset:
  std::string training_extra;  // lines inside training:
  std::string output_extra;    // lines inside output:
  // The cluster: section's lines. By default runs that fail on purpose end at once instead of
  // waiting for a restarted group.
  std::string cluster = "  rendezvous_timeout_seconds: 2\n";
  std::string extra;  // whole sections appended at the end
};

// The job: the tiny model, 128 px buckets, network_dim 4 / alpha 2, seed 5, batch 1, lr 1e-3
// cosine with min(2, max_steps - 1) warmup steps, output_name e2e.
std::string tiny_job_yaml(const TinyJobYaml& job);

}  // namespace lf::test
