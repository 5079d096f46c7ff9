// The fixture of the integration tests that train the tiny model on the demo photographs: a
// scratch folder with 3 training photos x 2 repeats and 2 greyscale reg photos, a tiny base
// checkpoint, a job YAML writer, and a runner for a real coordinator plus `mpirun -np N` workers.
// Also byte-level LoRA comparisons.
#pragma once

#include <gtest/gtest.h>

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>

#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job_config.h"

namespace lf::test {

class TinyJobTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;  // keeps the scratch folder of a failed test for inspection

  // Writes <scratch>/<name>: the tiny model, 128 px buckets, network_dim 4 / alpha 2, seed 5,
  // lr 1e-3 cosine with 2 warmup steps. `extra` is appended at the end (whole sections),
  // `dataset_extra` inside `dataset:`, `training_extra` inside `training:`.
  std::string write_config(const std::string& name, const std::string& output_dir, int max_steps,
                           int save_every, int coord_port, int metrics_port, int worker_port_base,
                           const std::string& extra = "", const std::string& dataset_extra = "",
                           const std::string& training_extra = "");

  // Adds network_train_unet_only: true to the config at `path` (LoRA on the UNet only, as
  // kohya's --network_train_unet_only); returns the path.
  std::string with_unet_only(const std::string& path);
  // Adds `keys` ("  key: value\n" lines) to the output section of the config at `path`;
  // returns the path.
  std::string with_output_keys(const std::string& path, const std::string& keys);
  // Sets cluster.rendezvous_timeout_seconds (2 in these configs, so that a missing rank fails
  // fast) to `seconds` in the config at `path`; returns the path. For a run whose coordinator
  // finds its job finished: it waits that long for the workers before it reports the job done,
  // and two loaded workers may take longer than 2 s to start. The key is not part of the job's
  // identity, so the coordinator still finds the job's state.
  std::string with_rendezvous_timeout(const std::string& path, int seconds);

  // Runs coordinator + np workers (`env` prefixes the worker command, e.g. "VAR=1"); returns
  // the workers' combined output and exit code (100 + the coordinator's when only it failed).
  RunResult run_job(const std::string& config, int coord_port, int np,
                    const std::string& worker_flags, std::string* coord_output = nullptr,
                    const std::string& env = "");

  std::filesystem::path dir_;
  std::string checkpoint_;
};

// The tensors of a safetensors file by name, in their stored dtypes.
std::map<std::string, at::Tensor> lora_tensors(const std::string& path);
// Same shape, dtype and bytes.
bool bytes_equal(const at::Tensor& a, const at::Tensor& b);
// The two LoRA files hold the same tensors, byte for byte (gtest expectations).
void expect_same_lora(const std::string& a_path, const std::string& b_path);

}  // namespace lf::test
