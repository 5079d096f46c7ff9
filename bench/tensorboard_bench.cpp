// lorafleet-bench-tensorboard: the cost TensorBoard logging adds to a training step, measured
// through the logger rank 0 runs (worker/app/tensorboard_logger.h): on_step with the full tag
// set of a 2-part LoRA (loss, average, lr/unet, lr/textencoder, grad_norm, perf/*), flushed
// every step as in training, into a scratch run folder. Prints one JSON line with the
// microseconds per step; bench/README.md sets it against the demo's step time.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "worker/app/tensorboard_logger.h"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 2000;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "lorafleet-bench-tensorboard";
  std::filesystem::remove_all(dir);
  lf::TensorBoardOptions o;
  o.logging_dir = (dir / "logs").string();
  o.output_dir = (dir / "out").string();
  o.optimizer_type = "AdamW";
  lf::TensorBoardLogger logger(o);
  logger.on_start(steps, 0);
  lf::StepReport r;
  r.part_lrs = {{"unet", 1e-4, 1e-4}, {"textencoder", 5e-5, 5e-5}};
  r.grad_norm = 0.7;
  r.step_seconds = 0.3;
  r.global_samples = 4;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= steps; ++i) {
    r.global_step = i;
    r.epoch = i / 100;
    r.loss = 0.1 + 1.0 / i;
    logger.on_step(r);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  logger.on_end(true);
  std::printf(
      "{\"impl\": \"lorafleet TensorBoardLogger\", \"steps\": %d, "
      "\"microseconds_per_step\": %.2f}\n",
      steps, 1e6 * s / steps);
  std::filesystem::remove_all(dir);
  return 0;
}
