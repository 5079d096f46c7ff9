// The tiny-job fixture (see header).
#include "tests/integration/tiny_job.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include "worker/io/tensor_file.h"

namespace fs = std::filesystem;

namespace lf::test {
namespace {
const std::string kDemo = std::string(LF_SOURCE_DIR) + "/.deps/demo";
const std::string kVocab = std::string(LF_SOURCE_DIR) + "/.deps/bpe_simple_vocab_16e6.txt.gz";
}  // namespace

void TinyJobTest::SetUp() {
  ASSERT_TRUE(fs::exists(kVocab)) << kVocab << " missing: run scripts/install_deps.sh";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = fs::temp_directory_path() / ("lf_" + std::string(info->test_suite_name()) + "_" +
                                      std::to_string(getpid()) + "_" + info->name());
  try {
    checkpoint_ = lay_out_tiny_job(dir_.string(), kDemo, LF_MAKE_CHECKPOINT_BIN);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
}

void TinyJobTest::TearDown() {
  if (!HasFailure()) fs::remove_all(dir_);
}

std::string TinyJobTest::write_config(const std::string& name, const std::string& output_dir,
                                      int max_steps, int save_every, int coord_port,
                                      int metrics_port, int worker_port_base,
                                      const std::string& extra, const std::string& dataset_extra,
                                      const std::string& training_extra) {
  TinyJobYaml job;
  job.dir = dir_.string();
  job.checkpoint = checkpoint_;
  job.vocab = kVocab;
  job.output_dir = output_dir;
  job.max_steps = max_steps;
  job.save_every = save_every;
  job.coord_port = coord_port;
  job.metrics_port = metrics_port;
  job.worker_port_base = worker_port_base;
  job.dataset_extra = dataset_extra;
  job.training_extra = training_extra;
  job.extra = extra;
  const fs::path p = dir_ / name;
  std::ofstream(p) << tiny_job_yaml(job);
  return p.string();
}

std::string TinyJobTest::with_unet_only(const std::string& path) {
  std::string y = read_file(path);
  y.replace(y.find("network:\n"), 9, "network:\n  network_train_unet_only: true\n");
  std::ofstream(path) << y;
  return path;
}

std::string TinyJobTest::with_rendezvous_timeout(const std::string& path, int seconds) {
  std::string y = read_file(path);
  const std::string key = "rendezvous_timeout_seconds: ";
  const std::size_t at = y.find(key);
  y.replace(at, y.find('\n', at) - at, key + std::to_string(seconds));
  std::ofstream(path) << y;
  return path;
}

std::string TinyJobTest::with_output_keys(const std::string& path, const std::string& keys) {
  std::string y = read_file(path);
  const std::string anchor = "  output_name: e2e\n";
  y.insert(y.find(anchor) + anchor.size(), keys);
  std::ofstream(path) << y;
  return path;
}

RunResult TinyJobTest::run_job(const std::string& config, int coord_port, int np,
                               const std::string& worker_flags, std::string* coord_output,
                               const std::string& env) {
  auto coord = std::async(std::launch::async, [&] {
    return run(std::string(LF_COORDINATOR_BIN) + " --config " + config);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  RunResult w = run((env.empty() ? "" : env + " ") + mpirun(np) + " " + LF_WORKER_BIN +
                    " --coordinator 127.0.0.1:" + std::to_string(coord_port) +
                    " --no-progress-bar " + worker_flags);
  RunResult c = coord.get();
  if (coord_output) *coord_output = c.output;
  if (c.exit_code != 0)
    w.output += "\n[coordinator exit " + std::to_string(c.exit_code) + "]\n" + c.output;
  if (w.exit_code == 0 && c.exit_code != 0) w.exit_code = 100 + c.exit_code;
  return w;
}

std::map<std::string, at::Tensor> lora_tensors(const std::string& path) {
  auto loaded = lf::load_safetensors(path, /*use_mmap=*/false, kKeepStoredDtype);
  return {loaded.tensors.begin(), loaded.tensors.end()};
}

bool bytes_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

void expect_same_lora(const std::string& a_path, const std::string& b_path) {
  const auto ta = lora_tensors(a_path);
  const auto tb = lora_tensors(b_path);
  ASSERT_EQ(ta.size(), tb.size());
  ASSERT_GT(ta.size(), 0u);
  for (const auto& [name, t] : ta) {
    ASSERT_TRUE(tb.count(name)) << name;
    EXPECT_TRUE(bytes_equal(t, tb.at(name))) << "tensor differs: " << name;
  }
}

}  // namespace lf::test
