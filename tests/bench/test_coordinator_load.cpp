// The coordinator load test at smoke size (bench/coordinator_load/load_test.h): 64 simulated
// ranks against a real lorafleet-coordinator process. Every rank registers into one generation
// with its own rank, is served the same plan of every epoch, no call fails, checkpoints commit,
// a silent rank's lease expires no sooner than coordinator.worker_timeout_seconds and within a
// tick (1 s) and a poll of it, the group re-forms as generation 2 and the job ends with exit 0.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

#include "bench/coordinator_load/load_test.h"
#include "proto/proto_convert.h"

namespace lf::load {
namespace {

LoadTestOptions smoke_options() {
  LoadTestOptions o;
  o.coordinator_binary = LF_COORDINATOR_BIN;
  // 96 images in 3 buckets x 2 repeats: each bucket one full global batch of 64 ranks x 1, so an
  // epoch is 3 steps and 10 steps cross 3 epoch boundaries.
  o.job.images = 96;
  o.job.num_repeats = 2;
  o.job.worker_timeout_seconds = 10;  // the config's floor
  o.fleet.ranks = 64;
  o.fleet.steps = 10;
  o.fleet.step_seconds = 0.1;
  o.fleet.step_skew_seconds = 0.01;
  o.fleet.heartbeat_seconds = 1.0;
  o.fleet.checkpoint_every = 5;
  return o;
}

void expect_formed(const StartResult& s, int ranks, std::uint64_t generation) {
  EXPECT_EQ(s.registered, ranks);
  EXPECT_EQ(s.distinct_ranks, ranks);
  EXPECT_EQ(s.generations, std::set<std::uint64_t>{generation});
  EXPECT_GT(s.manifest_bytes, 0);
}

TEST(CoordinatorLoad, SixtyFourRanksThroughEveryPhase) {
  const LoadTestOptions o = smoke_options();
  const LoadTestResult r = run_load_test(o);
  std::printf("%s\n", to_json(o, r).c_str());  // the figures, for the CI log
  EXPECT_EQ(r.failed_rpcs, 0);
  for (const std::string& f : r.failures) ADD_FAILURE() << f;

  expect_formed(r.first_start, 64, 1);
  expect_formed(r.restart, 64, 2);

  // One plan per epoch for every rank: epoch 0 twice (both generations), epochs 1-3 once.
  EXPECT_EQ(r.plan_batches, 3);
  EXPECT_EQ(r.first_batch_samples, 64);  // a sample for every rank
  EXPECT_EQ(r.plan_samples, 192);
  ASSERT_EQ(r.plan_digests.size(), 4u);
  for (const auto& [epoch, digests] : r.plan_digests) {
    EXPECT_EQ(digests.size(), 1u) << "epoch " << epoch;
    EXPECT_EQ(r.plans_served.at(epoch), epoch == 0 ? 128 : 64) << "epoch " << epoch;
  }
  EXPECT_GT(r.plan_bytes, 0);
  EXPECT_LT(r.plan_bytes, kMaxPlanMessageBytes);

  // Every step of every rank reported (some merged into the next, as the worker's sender does),
  // and the coordinator holds every rank's last step.
  EXPECT_EQ(r.train.reports + r.train.coalesced, 64 * 10);
  EXPECT_EQ(r.lease.lowest_step_reported, 10);
  EXPECT_EQ(r.train.stop_acks, 0);
  EXPECT_EQ(r.train.committed_steps, (std::set<std::int64_t>{5, 10}));
  EXPECT_EQ(r.latency.at("Register").calls, 128);
  EXPECT_EQ(r.latency.at("CommitCheckpoint").calls, 128);
  EXPECT_EQ(r.latency.at("Finish").calls, 64);

  // The lease: never before worker_timeout; the ticker checks every second, the poll adds 50 ms.
  EXPECT_GE(r.lease.detect_seconds, 10.0);
  EXPECT_LE(r.lease.detect_seconds, 12.0);
  EXPECT_EQ(r.lease.state, "restarting");
  EXPECT_NE(r.lease.end_reason.find("rank 63 "), std::string::npos) << r.lease.end_reason;
  EXPECT_NE(r.lease.end_reason.find("silent for 10 s"), std::string::npos) << r.lease.end_reason;
  // Every other rank hears it at its next heartbeat (1 s here).
  EXPECT_GE(r.lease.all_told_seconds, r.lease.detect_seconds - 1.0);
  EXPECT_LE(r.lease.all_told_seconds, r.lease.detect_seconds + 2.0);

  EXPECT_TRUE(r.job_done_logged);
  EXPECT_EQ(r.coordinator_exit_code, 0);
  EXPECT_GT(r.coordinator_cpu_seconds, 0.0);
  EXPECT_GT(r.coordinator_peak_rss_kib, 0);
  EXPECT_GT(r.coordinator_peak_threads, 1);
}

}  // namespace
}  // namespace lf::load
