// A real Prometheus server (Debian's `prometheus`) scrapes the coordinator and both workers on
// loopback while a short 2-rank job runs and lingers; its HTTP API's answer for
// lorafleet_global_step must equal what the coordinator itself reports, and every target must
// have been scraped healthily (job "lorafleet-worker" per rank, up == 1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "tests/integration/process_util.h"

namespace fs = std::filesystem;
using lf::test::free_port;
using lf::test::run;
using lf::test::RunResult;

namespace {

const std::string kDemo = std::string(LF_SOURCE_DIR) + "/.deps/demo";
const std::string kVocab = std::string(LF_SOURCE_DIR) + "/.deps/bpe_simple_vocab_16e6.txt.gz";

// The value of an instant-vector query, or "" while Prometheus has none.
std::string query(int prom_port, const std::string& promql) {
  const RunResult r = run("curl -s --max-time 5 'http://127.0.0.1:" + std::to_string(prom_port) +
                          "/api/v1/query' --data-urlencode 'query=" + promql + "'");
  if (r.exit_code != 0) return "";
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return "";
  const auto& result = j["data"]["result"];
  if (!result.is_array() || result.empty()) return "";
  return result[0]["value"][1].get<std::string>();
}

TEST(PrometheusScrape, QueriedGlobalStepEqualsTheCoordinatorsOwn) {
  if (run("command -v prometheus").exit_code != 0) GTEST_SKIP() << "prometheus not installed";
  const fs::path dir = fs::temp_directory_path() / ("lf_prom_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "train/2_photo");
  for (const char* stem : {"astronaut", "chelsea", "coffee"}) {
    for (const char* ext : {".png", ".txt"}) {
      fs::copy_file(kDemo + "/train/10_photo/" + stem + ext,
                    dir / "train/2_photo" / (std::string(stem) + ext));
    }
  }
  ASSERT_EQ(run(std::string(LF_MAKE_CHECKPOINT_BIN) + " --architecture tiny --seed 7 --output " +
                (dir / "base.safetensors").string())
                .exit_code,
            0);
  const int cport = free_port(), mport = free_port(), prom_port = free_port();
  int wport = free_port();
  while (free_port() == wport + 1) wport = free_port();  // rank 1 serves on wport + 1
  {
    std::ofstream f(dir / "job.yaml");
    f << "model:\n  pretrained_model_name_or_path: " << (dir / "base.safetensors").string()
      << "\n  architecture: tiny\n  tokenizer_vocab: " << kVocab << "\n"
      << "dataset:\n  train_data_dir: " << (dir / "train").string()
      << "\n  resolution: 128\n  min_bucket_reso: 64\n  max_bucket_reso: 256\n"
      << "  caption_extension: .txt\n"
      << "training:\n  seed: 5\n  max_train_steps: 9\n"
      << "output:\n  output_dir: " << (dir / "out").string() << "\n"
      << "coordinator:\n  listen_address: 127.0.0.1:" << cport
      << "\n  metrics_address: 127.0.0.1:" << mport << "\n  linger_seconds: 60\n"
      << "worker:\n  metrics_port_base: " << wport << "\n"
      << "cluster:\n  world_size: 2\n";
    std::ofstream p(dir / "prometheus.yml");
    p << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
      << "scrape_configs:\n"
      << "  - job_name: lorafleet-coordinator\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << mport << "']\n"
      << "  - job_name: lorafleet-worker\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << wport << "', '127.0.0.1:" << wport + 1 << "']\n";
  }
  ASSERT_EQ(run("promtool check config " + (dir / "prometheus.yml").string()).exit_code, 0);
  auto prom = std::async(std::launch::async, [&] {
    return run("exec timeout 180 prometheus --config.file=" + (dir / "prometheus.yml").string() +
               " --storage.tsdb.path=" + (dir / "tsdb").string() +
               " --web.listen-address=127.0.0.1:" + std::to_string(prom_port) +
               " --log.level=warn");
  });
  // Scraping must run while the workers train: wait until Prometheus is ready.
  for (int i = 0; i < 120; ++i) {
    if (run("curl -sf --max-time 2 http://127.0.0.1:" + std::to_string(prom_port) + "/-/ready")
            .exit_code == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  auto coord = std::async(std::launch::async, [&] {
    return run(std::string(LF_COORDINATOR_BIN) + " --config " + (dir / "job.yaml").string());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const RunResult workers = run(std::string(LF_LAUNCH_BIN) + " --nproc 2 -- " + LF_WORKER_BIN +
                                " --coordinator 127.0.0.1:" + std::to_string(cport) +
                                " --no-progress-bar --metrics-linger-seconds 5");
  ASSERT_EQ(workers.exit_code, 0) << workers.output;

  // The coordinator's own answer, from its /metrics (it lingers after the job).
  const RunResult own =
      run("curl -s --max-time 5 http://127.0.0.1:" + std::to_string(mport) + "/metrics");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(own.output, m, std::regex("\nlorafleet_global_step ([0-9.e+]+)")))
      << own.output;
  const double reported = std::stod(m[1]);
  EXPECT_EQ(reported, 9.0);

  std::string value, workers_up;
  for (int i = 0; i < 60; ++i) {
    value = query(prom_port, "lorafleet_global_step");
    workers_up = query(prom_port, "sum(max_over_time(up{job=\"lorafleet-worker\"}[10m]))");
    if (!value.empty() && std::stod(value) == reported && workers_up == "2") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  run("pkill -f 'storage.tsdb.path=" + (dir / "tsdb").string() + "'");
  run("pkill -f '" + std::string(LF_COORDINATOR_BIN) + " --config " + (dir / "job.yaml").string() +
      "'");
  prom.wait();
  coord.wait();
  ASSERT_FALSE(value.empty()) << "Prometheus never returned lorafleet_global_step";
  EXPECT_EQ(std::stod(value), reported);
  // The workers have stopped serving by now: each was up while it trained.
  EXPECT_EQ(workers_up, "2") << "both worker endpoints scraped";
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
