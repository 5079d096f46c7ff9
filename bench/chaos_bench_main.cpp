// lorafleet-bench-chaos: the long chaos run of issue 14 (bench/run_chaos.sh, bench/README.md):
// tests/integration/chaos_run.h with the seed, fault count and job size from the command line.
// Prints the plan, each fault as it is injected and a summary; exits 0 when the run passed,
// 1 when it failed (each failed expectation on its own line), 2 on bad arguments.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <string>

#include "tests/integration/chaos_run.h"

int main(int argc, char** argv) {
  CLI::App app{"lorafleet-bench-chaos: a seeded chaos run against an uninterrupted one"};
  lf::test::ChaosOptions o;
  o.seed = 1;
  o.faults = 20;
  o.steps = 300;
  o.save_every = 5;
  o.work_dir = (std::filesystem::temp_directory_path() / "lf_bench_chaos").string();
  int time_limit = 1800;
  int wait_limit = 120;
  app.add_option("--seed", o.seed, "seed of the faults (std::mt19937_64)");
  app.add_option("--faults", o.faults, "number of faults")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "max_train_steps of the job")->check(CLI::PositiveNumber);
  app.add_option("--save-every", o.save_every, "save_every_n_steps")->check(CLI::PositiveNumber);
  app.add_option("--world-size", o.world_size, "ranks")->check(CLI::PositiveNumber);
  app.add_flag("--late", o.late_faults,
               "let the last fault come after the job's last step (a known open race, "
               "bench/README.md)");
  app.add_option("--work-dir", o.work_dir, "scratch folder (removed first, kept after)");
  app.add_option("--time-limit", time_limit, "seconds for both runs together");
  app.add_option("--wait-limit", wait_limit, "seconds for any one wait");
  CLI11_PARSE(app, argc, argv);
  o.time_limit = std::chrono::seconds(time_limit);
  o.wait_limit = std::chrono::seconds(wait_limit);
  o.demo_dir = std::string(LF_SOURCE_DIR) + "/.deps/demo";
  o.vocab = std::string(LF_SOURCE_DIR) + "/.deps/bpe_simple_vocab_16e6.txt.gz";
  o.programs = {LF_COORDINATOR_BIN, LF_WORKER_BIN, LF_LAUNCH_BIN, LF_MAKE_CHECKPOINT_BIN};

  const lf::test::ChaosResult r = lf::test::run_chaos(o, std::cout);
  for (const std::string& f : lf::test::chaos_failures(o, r))
    std::cout << "[chaos] FAILED: " << f << "\n";
  std::cout << lf::test::chaos_summary(o, r) << std::endl;
  return lf::test::chaos_failures(o, r).empty() ? 0 : 1;
}
