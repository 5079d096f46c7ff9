// lorafleet-bench-train-step: times LoRA training steps of a preset's UNet on lf_train_core
// and prints one JSON line (see bench/train_step_bench.h, bench/README.md).
#include <cstdio>
#include <exception>
#include <iostream>

#include "train_step_bench.h"

int main(int argc, char** argv) {
  try {
    lf::TrainStepBenchOptions options;
    if (!lf::parse_train_step_bench_args(argc, argv, options)) {
      std::cout << lf::train_step_bench_usage();
      return 0;
    }
    const lf::TrainStepBenchResult result = lf::run_train_step_bench(options);
    std::cout << lf::train_step_bench_json(options, result) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lorafleet-bench-train-step: %s\n", e.what());
    return 2;
  }
}
