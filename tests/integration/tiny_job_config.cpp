// The tiny job's folder and YAML (see header).
#include "tests/integration/tiny_job_config.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "tests/integration/process_util.h"

namespace fs = std::filesystem;

namespace lf::test {

std::string lay_out_tiny_job(const std::string& dir, const std::string& demo_dir,
                             const std::string& make_checkpoint_bin) {
  if (!fs::exists(demo_dir + "/train/10_photo/astronaut.png")) {
    throw std::runtime_error("demo data missing at " + demo_dir +
                             ": run scripts/prepare_demo_data.sh (scripts/test.sh does)");
  }
  fs::remove_all(dir);
  copy_demo_photos(demo_dir, dir);
  copy_demo_reg_photos(demo_dir, dir);
  const std::string checkpoint = (fs::path(dir) / "base.safetensors").string();
  const RunResult mk = make_tiny_checkpoint(make_checkpoint_bin, checkpoint);
  if (mk.exit_code != 0) {
    throw std::runtime_error(make_checkpoint_bin + " failed (exit " + std::to_string(mk.exit_code) +
                             "):\n" + mk.output);
  }
  return checkpoint;
}

std::string tiny_job_yaml(const TinyJobYaml& j) {
  const fs::path dir(j.dir);
  std::ostringstream f;
  f << "model:\n  pretrained_model_name_or_path: " << j.checkpoint
    << "\n  architecture: tiny\n  tokenizer_vocab: " << j.vocab << "\n"
    << "dataset:\n  train_data_dir: " << (dir / "train").string()
    << "\n  reg_data_dir: " << (dir / "reg").string()
    << "\n  resolution: 128\n  min_bucket_reso: 64\n  max_bucket_reso: 256\n"
    << "  caption_extension: .txt\n"
    << j.dataset_extra << "network:\n  network_dim: 4\n  network_alpha: 2.0\n"
    << "training:\n  seed: 5\n  train_batch_size: 1\n  learning_rate: 0.001\n"
    // A warmup must be shorter than the run (kohya's schedules, checked at start-up).
    << "  lr_scheduler: cosine\n  lr_warmup_steps: " << std::max(0, std::min(2, j.max_steps - 1))
    << "\n  max_train_steps: " << j.max_steps << "\n  save_every_n_steps: " << j.save_every << "\n"
    << j.training_extra << "output:\n  output_dir: " << j.output_dir << "\n  output_name: e2e\n"
    << j.output_extra << "coordinator:\n  listen_address: 127.0.0.1:" << j.coord_port
    << "\n  metrics_address: "
    << (j.metrics_port > 0 ? "127.0.0.1:" + std::to_string(j.metrics_port) : "\"\"") << "\n"
    << "worker:\n  metrics_port_base: " << j.worker_port_base << "\n"
    << "cluster:\n"
    << j.cluster << j.extra;
  return f.str();
}

}  // namespace lf::test
