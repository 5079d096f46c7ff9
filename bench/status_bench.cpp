// lorafleet-bench-status: what the status page and its history cost. Per progress report the
// coordinator records one ProgressHistory point (coordinator/progress_history.h); per page view
// it renders the page (coordinator/status_page.h) and per /api/v1/status the JSON
// (coordinator/status_report.h) from a status with a full 512-point history and 3 ranks. None of
// it runs on a worker: a training step only carries 2 more floats in its allreduce and reads 4
// more fields of the heartbeat answer. Prints one JSON line with the microseconds of each.
#include <chrono>
#include <cstdio>
#include <string>

#include "coordinator/progress_history.h"
#include "coordinator/status_page.h"
#include "coordinator/status_report.h"

namespace {

double micros_since(std::chrono::steady_clock::time_point t0, int n) {
  return 1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  const int reports = argc > 1 ? std::stoi(argv[1]) : 200000;
  const int views = argc > 2 ? std::stoi(argv[2]) : 2000;
  lf::ProgressHistory history;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= reports; ++i) history.add({i, 0.1 + 1.0 / i, 1e-4});
  const double add_us = micros_since(t0, reports);

  lorafleet::v1::JobStatus s;
  s.set_job_name("configs/demo.yaml");
  s.set_state("running");
  s.set_world_size(3);
  s.set_global_step(reports);
  for (const lf::ProgressPoint& p : history.points()) {
    auto* h = s.add_history();
    h->set_global_step(p.global_step);
    h->set_loss(p.loss);
    h->set_learning_rate(p.learning_rate);
  }
  for (int r = 0; r < 3; ++r) {
    auto* rank = s.add_ranks();
    rank->set_rank(r);
    rank->set_state("training");
    rank->set_hostname("host-" + std::to_string(r));
  }
  std::size_t bytes = 0;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < views; ++i) bytes += lf::render_status_page(s, {}).size();
  const double page_us = micros_since(t0, views);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < views; ++i) bytes += lf::status_json(s).size();
  const double json_us = micros_since(t0, views);
  std::printf(
      "{\"impl\": \"lorafleet status page\", \"history_points\": %zu, "
      "\"history_add_microseconds\": %.3f, \"page_render_microseconds\": %.1f, "
      "\"status_json_microseconds\": %.1f, \"bytes\": %zu}\n",
      history.points().size(), add_us, page_us, json_us, bytes / (2 * views));
  return 0;
}
