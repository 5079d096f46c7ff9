// run_load_test: the phases in order, each timed on the coordinator's CPU clock; to_json.
#include "bench/coordinator_load/load_test.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>

#include "bench/coordinator_load/coordinator_process.h"
#include "proto/proto_convert.h"

namespace lf::load {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

std::string make_work_dir(const std::string& given) {
  if (!given.empty()) {
    fs::create_directories(given);
    return given;
  }
  char tmpl[] = "/tmp/lf_coordinator_load_XXXXXX";
  if (mkdtemp(tmpl) == nullptr)
    throw std::runtime_error("cannot create /tmp/lf_coordinator_load_*");
  return tmpl;
}

std::string random_token() {
  std::random_device rd;
  char text[33];
  std::snprintf(text, sizeof text, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return text;
}

// Runs `fn` and books the coordinator's wall and CPU seconds meanwhile under `name`.
void phase(const CoordinatorProcess& coord, LoadTestResult& out, const std::string& name,
           const std::function<void()>& fn) {
  const double cpu0 = coord.stats().cpu_seconds;
  const Clock::time_point t0 = Clock::now();
  fn();
  PhaseCost& cost = out.phases[name];
  cost.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  cost.cpu_seconds = coord.stats().cpu_seconds - cpu0;
}

// The fleet's phases against a serving coordinator.
void run_phases(const LoadTestOptions& o, const CoordinatorProcess& coord,
                FleetOptions fleet_options, LoadTestResult& out) {
  SimulatedFleet fleet(coord.address(), fleet_options);
  out.connect_seconds = fleet.connect(std::chrono::seconds(120));
  const auto minutes = [](int n) { return std::chrono::seconds(60 * n); };
  phase(coord, out, "start", [&] { out.first_start = fleet.start(0, "", minutes(10)); });
  const auto train_budget = std::chrono::seconds(
      120 + static_cast<int>(fleet_options.steps * fleet_options.step_seconds));
  phase(coord, out, "train", [&] { out.train = fleet.train(train_budget); });
  const auto lease_budget = std::chrono::seconds(
      60 + o.job.worker_timeout_seconds + static_cast<int>(2 * fleet_options.heartbeat_seconds));
  phase(coord, out, "lease",
        [&] { out.lease = fleet.expire_lease(fleet_options.ranks - 1, lease_budget); });
  phase(coord, out, "restart", [&] { out.restart = fleet.start(1, "worker_lost", minutes(10)); });
  phase(coord, out, "finish", [&] { out.finish_seconds = fleet.finish(minutes(2)); });
  out.latency = fleet.latencies().summary();
  out.failed_rpcs = fleet.latencies().failed();
  out.failures = fleet.failures();
  out.plan_digests = fleet.plan_digests();
  out.plans_served = fleet.plans_served();
  out.plan_bytes = fleet.largest_plan_bytes();
  out.plan_batches = fleet.plan_batches();
  out.plan_samples = fleet.plan_samples();
  out.first_batch_samples = fleet.first_batch_samples();
}

// After the last Finish: waits for the coordinator's linger (the job has ended and its metrics
// are written), reads its totals, then stops it for its exit code.
void read_coordinator_end(CoordinatorProcess& coord, LoadTestResult& out) {
  const Clock::time_point until = Clock::now() + std::chrono::seconds(30);
  while (!coord.log_contains("lingering") && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const ProcStats end = coord.stats();
  out.coordinator_cpu_seconds = end.cpu_seconds;
  out.coordinator_peak_rss_kib = end.peak_rss_kib;
  out.coordinator_peak_threads = coord.peak_threads();
  out.job_done_logged = coord.log_contains("job done: all " + std::to_string(out.ranks) +
                                           " ranks of generation 2 finished");
  out.coordinator_exit_code = coord.stop(std::chrono::seconds(30));
}

}  // namespace

LoadTestResult run_load_test(const LoadTestOptions& o) {
  LoadTestResult out;
  out.ranks = o.fleet.ranks;
  const std::string dir = make_work_dir(o.work_dir);
  const std::string yaml = write_load_job(dir, o.job);
  FleetOptions fleet_options = o.fleet;
  fleet_options.token = random_token();
  const Clock::time_point t0 = Clock::now();
  CoordinatorProcess coord(o.coordinator_binary, yaml, fleet_options.token,
                           dir + "/coordinator.log", std::chrono::seconds(300));
  out.coordinator_startup_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  try {
    run_phases(o, coord, fleet_options, out);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(e.what()) + " (coordinator log: " + dir +
                             "/coordinator.log)");
  }
  read_coordinator_end(coord, out);
  if (!o.keep_work_dir && o.work_dir.empty()) fs::remove_all(dir);
  return out;
}

namespace {

nlohmann::json start_json(const StartResult& s) {
  return {{"seconds", s.seconds},
          {"barrier_release_seconds", s.barrier_release_seconds},
          {"registered", s.registered},
          {"distinct_ranks", s.distinct_ranks},
          {"generations", s.generations}};
}

nlohmann::json coordinator_json(const LoadTestResult& r) {
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& [name, cost] : r.phases) {
    phases[name] = {{"wall_seconds", cost.wall_seconds}, {"cpu_seconds", cost.cpu_seconds}};
  }
  const auto train = r.phases.find("train");
  const double train_cpu = train == r.phases.end() ? 0.0 : train->second.cpu_seconds;
  const std::int64_t train_reports = r.train.reports + r.train.heartbeats;
  return {{"startup_seconds", r.coordinator_startup_seconds},
          {"cpu_seconds", r.coordinator_cpu_seconds},
          {"phases", phases},
          {"train_cpu_microseconds_per_report",
           train_reports > 0 ? 1e6 * train_cpu / static_cast<double>(train_reports) : 0.0},
          {"peak_rss_mib", static_cast<double>(r.coordinator_peak_rss_kib) / 1024.0},
          {"peak_threads", r.coordinator_peak_threads},
          {"exit_code", r.coordinator_exit_code}};
}

}  // namespace

std::string to_json(const LoadTestOptions& o, const LoadTestResult& r) {
  nlohmann::json latency = nlohmann::json::object();
  for (const auto& [method, s] : r.latency) {
    latency[method] = {{"calls", s.calls}, {"failed", s.failed}, {"p50", s.p50_ms},
                       {"p90", s.p90_ms},  {"p99", s.p99_ms},    {"max", s.max_ms}};
  }
  nlohmann::json digests = nlohmann::json::object();
  for (const auto& [epoch, set] : r.plan_digests) {
    digests[std::to_string(epoch)] = {{"distinct", set.size()},
                                      {"served", r.plans_served.at(epoch)}};
  }
  constexpr std::int64_t kGrpcDefaultReceive =
      4 * 1024 * 1024;  // GRPC_DEFAULT_MAX_RECV_MESSAGE_LENGTH
  const nlohmann::json j = {
      {"impl", "lorafleet coordinator load test"},
      {"ranks", r.ranks},
      {"images", o.job.images},
      {"num_repeats", o.job.num_repeats},
      {"batch_size", o.job.batch_size},
      {"shuffle_caption", o.job.shuffle_caption},
      {"steps", o.fleet.steps},
      {"step_seconds", o.fleet.step_seconds},
      {"heartbeat_seconds", o.fleet.heartbeat_seconds},
      {"checkpoint_every", o.fleet.checkpoint_every},
      {"connect_seconds", r.connect_seconds},
      {"start", start_json(r.first_start)},
      {"restart", start_json(r.restart)},
      {"rpc_ms", latency},
      {"failed_rpcs", r.failed_rpcs},
      {"failures", r.failures},
      {"reports", r.train.reports},
      {"coalesced_reports", r.train.coalesced},
      {"heartbeats", r.train.heartbeats},
      {"committed_steps", r.train.committed_steps},
      {"stop_acks_while_training", r.train.stop_acks},
      {"plan",
       {{"bytes", r.plan_bytes},
        {"batches", r.plan_batches},
        {"samples", r.plan_samples},
        {"first_batch_samples", r.first_batch_samples},
        {"digests_by_epoch", digests},
        {"limit_bytes", kMaxPlanMessageBytes},
        {"fraction_of_limit", static_cast<double>(r.plan_bytes) / kMaxPlanMessageBytes},
        {"fraction_of_grpc_default", static_cast<double>(r.plan_bytes) / kGrpcDefaultReceive}}},
      {"manifest_bytes", r.first_start.manifest_bytes},
      {"register_response_bytes", r.first_start.register_response_bytes},
      {"lease",
       {{"worker_timeout_seconds", o.job.worker_timeout_seconds},
        {"detect_seconds", r.lease.detect_seconds},
        {"all_told_seconds", r.lease.all_told_seconds},
        {"lowest_step_reported", r.lease.lowest_step_reported},
        {"state", r.lease.state},
        {"end_reason", r.lease.end_reason}}},
      {"coordinator", coordinator_json(r)},
      {"job_done_logged", r.job_done_logged}};
  return j.dump();
}

}  // namespace lf::load
