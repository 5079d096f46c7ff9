// lorafleet-bench-coordinator-load: many simulated workers against one real coordinator
// (bench/coordinator_load/load_test.h); prints one JSON line. Flags (defaults in brackets):
//   --coordinator PATH      lorafleet-coordinator [../coordinator/lorafleet-coordinator next to
//                           this binary's folder]
//   --ranks N [512]  --steps N [60]  --step-seconds S [1]  --skew-seconds S [0.02]
//   --heartbeat-seconds S [5]  --checkpoint-every K [20]
//   --images N [4096]  --repeats N [4]  --batch-size N [1]  --no-shuffle-caption
//   --worker-timeout S [10]  --work-dir DIR [a fresh /tmp dir, removed]  --keep
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "bench/coordinator_load/load_test.h"

namespace {

// <build>/coordinator/lorafleet-coordinator, this binary being <build>/bench/...
std::string default_coordinator() {
  const std::filesystem::path self = std::filesystem::canonical("/proc/self/exe");
  return (self.parent_path().parent_path() / "coordinator" / "lorafleet-coordinator").string();
}

}  // namespace

int main(int argc, char** argv) {
  lf::load::LoadTestOptions o;
  o.coordinator_binary = default_coordinator();
  using Setter = std::function<void(const std::string&)>;
  const std::map<std::string, Setter> with_value = {
      {"--coordinator", [&](const std::string& v) { o.coordinator_binary = v; }},
      {"--ranks", [&](const std::string& v) { o.fleet.ranks = std::stoi(v); }},
      {"--steps", [&](const std::string& v) { o.fleet.steps = std::stoi(v); }},
      {"--step-seconds", [&](const std::string& v) { o.fleet.step_seconds = std::stod(v); }},
      {"--skew-seconds", [&](const std::string& v) { o.fleet.step_skew_seconds = std::stod(v); }},
      {"--heartbeat-seconds",
       [&](const std::string& v) { o.fleet.heartbeat_seconds = std::stod(v); }},
      {"--checkpoint-every",
       [&](const std::string& v) { o.fleet.checkpoint_every = std::stoi(v); }},
      {"--images", [&](const std::string& v) { o.job.images = std::stoi(v); }},
      {"--repeats", [&](const std::string& v) { o.job.num_repeats = std::stoi(v); }},
      {"--batch-size", [&](const std::string& v) { o.job.batch_size = std::stoi(v); }},
      {"--worker-timeout",
       [&](const std::string& v) { o.job.worker_timeout_seconds = std::stoi(v); }},
      {"--work-dir", [&](const std::string& v) { o.work_dir = v; }}};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--keep") {
      o.keep_work_dir = true;
    } else if (flag == "--no-shuffle-caption") {
      o.job.shuffle_caption = false;
    } else if (auto it = with_value.find(flag); it != with_value.end() && i + 1 < argc) {
      try {
        it->second(argv[++i]);
      } catch (const std::exception&) {
        std::fprintf(stderr, "%s: expected a number, got \"%s\"\n", flag.c_str(), argv[i]);
        return 3;
      }
    } else {
      std::fprintf(stderr,
                   "unknown flag or missing value: %s (see the comment at the top of "
                   "bench/coordinator_load_main.cpp)\n",
                   flag.c_str());
      return 3;
    }
  }
  try {
    const lf::load::LoadTestResult r = lf::load::run_load_test(o);
    std::printf("%s\n", lf::load::to_json(o, r).c_str());
    return r.failed_rpcs == 0 && r.coordinator_exit_code == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lorafleet-bench-coordinator-load: %s\n", e.what());
    return 1;
  }
}
