// lorafleet-coordinator: parses flags, loads the job config (a job YAML, or a kohya training
// --config_file TOML with an optional job YAML beside it) and hands over to run_coordinator.
// Any error becomes one line "lorafleet-coordinator: error: <what>": exit code 3 (kExitBadInput,
// do not retry) for a bad config, dataset or prompt file, 1 for anything else.
#include <CLI/CLI.hpp>

#include <chrono>
#include <exception>
#include <iostream>
#include <string>

#include "common/config/job_config.h"
#include "common/config/kohya_arg_fates.h"
#include "common/config/kohya_training_toml.h"
#include "common/data/dataset.h"
#include "common/util/exit_codes.h"
#include "common/util/log.h"
#include "coordinator/inspect.h"
#include "coordinator/server.h"

int main(int argc, char** argv) {
  CLI::App app{"lorafleet coordinator: plans the job and tracks the workers"};
  std::string config_path;
  std::string kohya_config_path;
  bool list_kohya_args = false;
  std::string listen;
  std::string metrics;
  std::string job_token_file;
  int world_size = 0;
  int linger_seconds = -1;
  double registration_timeout = 300.0;
  bool inspect = false;
  lf::InspectOptions inspect_options;
  app.add_option("--config", config_path,
                 "job config YAML (with --config_file: lorafleet's own keys only)");
  app.add_option("--config_file", kohya_config_path,
                 "kohya training TOML (train_network.py --config_file), dataset .toml named in "
                 "its dataset_config");
  app.add_flag("--list-kohya-args", list_kohya_args,
               "print what lorafleet does with each kohya train_network.py argument, then exit");
  auto* listen_opt =
      app.add_option("--listen", listen, "gRPC HOST:PORT (overrides coordinator.listen_address)");
  auto* metrics_opt = app.add_option(
      "--metrics", metrics, "/metrics HOST:PORT, \"\" disables (overrides metrics_address)");
  auto* token_opt = app.add_option(
      "--job-token-file", job_token_file,
      "file holding the job token (overrides coordinator.job_token_file; else LF_JOB_TOKEN)");
  app.add_option("--world-size", world_size, "number of ranks (default: cluster.world_size, else from the first Register)")
      ->check(CLI::Range(1, 65536));
  auto* linger_opt = app.add_option("--linger-seconds", linger_seconds,
                                    "keep serving after the job ends (overrides linger_seconds)")
                         ->check(CLI::Range(0, 7 * 24 * 3600));
  app.add_option("--registration-timeout", registration_timeout,
                 "seconds a Register waits for the other ranks")
      ->check(CLI::Range(0.001, 7 * 24 * 3600.0));
  app.add_flag("--inspect", inspect,
               "print the datasets, subsets, buckets, reg usage and steps per epoch, then exit "
               "(loads no model, starts no service)");
  app.add_option("--batch-size", inspect_options.batch_size,
                 "with --inspect: override every dataset's batch_size (per rank)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--gradient-accumulation-steps", inspect_options.gradient_accumulation_steps,
                 "with --inspect: batches per optimizer step (overrides "
                 "training.gradient_accumulation_steps)")
      ->check(CLI::Range(1, 1 << 20));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "lorafleet-coordinator: error: " << e.what() << " (see --help)" << std::endl;
    return 1;
  }

  if (list_kohya_args) {
    std::cout << "| kohya argument | fate | what lorafleet does |\n|---|---|---|\n"
              << lf::kohya_args_markdown() << std::flush;
    return 0;
  }
  if (config_path.empty() && kohya_config_path.empty()) {
    std::cerr << "lorafleet-coordinator: error: --config or --config_file is required (see "
                 "--help)"
              << std::endl;
    return 1;
  }

  try {
    lf::set_log_role("coordinator");
    const lf::JobConfig config =
        kohya_config_path.empty() ? lf::load_job_config(config_path)
                                  : lf::load_kohya_training_config(kohya_config_path, config_path);
    if (inspect) {
      inspect_options.world_size = world_size > 0 ? world_size : 1;
      std::cout << lf::inspect_job(config, inspect_options) << std::flush;
      return 0;
    }
    lf::CoordinatorOptions options;
    if (*listen_opt) options.listen_address = listen;
    if (*metrics_opt) options.metrics_address = metrics;
    if (*linger_opt) options.linger_seconds = linger_seconds;
    if (*token_opt) options.job_token_file = job_token_file;
    options.world_size = world_size;
    options.service.registration_timeout =
        std::chrono::milliseconds(static_cast<long long>(registration_timeout * 1000.0));
    return lf::run_coordinator(config, options);
  } catch (const std::exception& e) {
    std::cerr << "lorafleet-coordinator: error: " << e.what() << std::endl;
    // Bad input: restarting with the same input fails the same way.
    const bool bad_input = dynamic_cast<const lf::ConfigError*>(&e) != nullptr ||
                           dynamic_cast<const lf::DatasetError*>(&e) != nullptr;
    return bad_input ? lf::kExitBadInput : 1;
  }
}
