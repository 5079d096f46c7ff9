// The coordinator load test (issue 14): a generated job, a real lorafleet-coordinator process
// on loopback and a SimulatedFleet of N ranks through five phases:
//   start    every rank registers at once, fetches the dataset and epoch 0's plan;
//   train    lockstep steps with a report per rank per step, heartbeats, checkpoint commits
//            and the later epochs' plans;
//   lease    the last rank goes silent; the coordinator must end the generation once its lease
//            (coordinator.worker_timeout_seconds) runs out, and tell the others to stop;
//   restart  every rank registers again (restart cause worker_lost): generation 2;
//   finish   every rank reports Finish(ok): the job ends with exit 0.
// Measures the RPC latencies by method, the coordinator's CPU time per phase, peak RSS and
// threads, the plan and manifest sizes against the message limits, and the lease's detection
// time. bench/coordinator_load_main.cpp prints it as one JSON line (to_json).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/coordinator_load/fleet.h"
#include "bench/coordinator_load/latency_stats.h"
#include "bench/coordinator_load/load_job.h"

namespace lf::load {

struct LoadTestOptions {
  std::string coordinator_binary;  // lorafleet-coordinator
  std::string work_dir;            // "": a fresh /tmp/lf_coordinator_load_XXXXXX
  bool keep_work_dir = false;      // else the work dir is removed after a successful run
  LoadJobOptions job;
  FleetOptions fleet;  // fleet.token is set by the test
};

// The coordinator's wall and CPU seconds in one phase.
struct PhaseCost {
  double wall_seconds = 0.0;
  double cpu_seconds = 0.0;
};

struct LoadTestResult {
  int ranks = 0;
  double connect_seconds = 0.0;
  StartResult first_start;  // generation 1
  TrainResult train;
  LeaseResult lease;
  StartResult restart;  // generation 2
  double finish_seconds = 0.0;
  std::map<std::string, LatencySummary> latency;  // by RPC method
  std::int64_t failed_rpcs = 0;
  std::vector<std::string> failures;                  // the first few
  std::map<int, std::set<std::string>> plan_digests;  // epoch -> distinct digests served
  std::map<int, int> plans_served;                    // epoch -> GetEpochPlan answers
  std::int64_t plan_bytes = 0;                        // largest EpochPlan message
  int plan_batches = 0;                               // epoch 0: global batches
  std::int64_t plan_samples = 0;                      // epoch 0: samples
  int first_batch_samples = 0;  // epoch 0, batch 0 (world_size x batch_size when full)
  // The coordinator process.
  double coordinator_startup_seconds = 0.0;  // spawn -> serving (the dataset scan)
  std::map<std::string, PhaseCost> phases;   // "start", "train", "lease", "restart", "finish"
  double coordinator_cpu_seconds = 0.0;      // the whole process, up to the job's end
  long coordinator_peak_rss_kib = 0;         // VmHWM
  int coordinator_peak_threads = 0;          // sampled every 10 ms
  int coordinator_exit_code = -1;
  bool job_done_logged = false;  // "job done: all N ranks of generation 2 finished"
};

// Runs the whole test. Throws std::runtime_error when the coordinator cannot start or a phase
// does not complete in time (naming it and the first failed call); the work dir is kept then.
LoadTestResult run_load_test(const LoadTestOptions& options);

// One JSON object (one line) of the options and results, milliseconds for latencies.
std::string to_json(const LoadTestOptions& options, const LoadTestResult& result);

}  // namespace lf::load
