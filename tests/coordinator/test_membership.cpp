// Membership and CheckpointCommits alone (no gRPC, no clock but the one passed in): generations
// form and end, calls are checked against them, restarts are counted against the one budget,
// leases expire, and checkpoint reports become commits.
#include "coordinator/membership.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "coordinator/checkpoint_commits.h"

namespace lf {
namespace {

using std::chrono::seconds;
using Clock = Membership::Clock;

MembershipOptions options() {
  MembershipOptions o;
  o.alive_window = seconds(30);
  o.stall_warning = seconds(60);
  o.worker_timeout = seconds(120);
  o.rendezvous_timeout = seconds(300);
  o.max_restarts = 2;
  return o;
}

// Registers every rank at `now` and forms the generation; returns the restart cause counted.
std::string form(Membership& m, Clock::time_point now) {
  for (int r = 0; r < m.world_size(); ++r) {
    Membership::Rank me;
    me.hostname = "host" + std::to_string(r);
    m.register_rank(r, me, now);
  }
  const std::string cause = m.complete_registration(now);
  for (int r = 0; r < m.world_size(); ++r) m.rank(r).in_register = false;  // as Register does
  return cause;
}

TEST(Membership, MissingRanksNameTheFirstSixteenAndTheCount) {
  Membership m(options());
  m.set_world_size(40);
  Membership::Rank me;
  m.register_rank(3, me, Clock::now());
  EXPECT_EQ(m.missing_ranks(),
            "0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, ... (39 in total)");
  Membership small(options());
  small.set_world_size(17);
  small.register_rank(0, me, Clock::now());
  EXPECT_EQ(small.missing_ranks(), "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16");
}

TEST(Membership, GenerationsFormEndAndRefuseOlderCalls) {
  Membership m(options());
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(m.check_rank(0, "X")->code, Refusal::Code::kFailedPrecondition);  // no world size
  m.set_world_size(2);
  EXPECT_EQ(m.check_rank(2, "X")->message, "X: rank 2 is outside [0, world_size 2)");
  EXPECT_EQ(m.check_running_rank(0, "X")->message,
            "X from rank 0 before all ranks registered (0 of 2)");
  Membership::Rank me;
  const std::uint64_t id = m.register_rank(0, me, t0);
  EXPECT_TRUE(m.holds(0, id));
  EXPECT_EQ(m.missing_ranks(), "1");
  m.withdraw(0);  // its Register gave up
  EXPECT_FALSE(m.holds(0, id));
  EXPECT_EQ(form(m, t0), "");  // the first generation is no restart
  EXPECT_EQ(m.generation(), 1u);
  EXPECT_TRUE(m.running());
  EXPECT_EQ(m.check_generation(1, 0, "X"), std::nullopt);
  EXPECT_EQ(m.check_generation(0, 0, "X"), std::nullopt);  // a client that does not send it
  EXPECT_EQ(m.check_generation(2, 0, "X")->code, Refusal::Code::kFailedPrecondition);
  EXPECT_EQ(m.check_running_rank(1, "X"), std::nullopt);

  EXPECT_TRUE(m.end_generation("worker_failed", "rank 1 failed", t0));
  EXPECT_FALSE(m.end_generation("worker_failed", "again", t0));  // nothing runs
  EXPECT_FALSE(m.running());
  EXPECT_EQ(m.registered_count(), 0);
  EXPECT_EQ(m.rendezvous_deadline(), t0 + seconds(300));
  const auto refused = m.check_generation(1, 0, "ReportProgress");
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, Refusal::Code::kAborted);
  EXPECT_EQ(refused->message,
            "ReportProgress from rank 0: generation 1 ended (rank 1 failed); waiting for "
            "generation 2");
  EXPECT_EQ(form(m, t0), "worker_failed");
  EXPECT_EQ(m.generation(), 2u);
  EXPECT_EQ(m.rendezvous_deadline(), std::nullopt);
  EXPECT_EQ(m.check_generation(1, 0, "X")->message,
            "X from rank 0: generation 1 was superseded by 2");
}

// One budget: cluster.max_restarts unless the group's lorafleet-launch gave --max-restarts;
// preemptions are counted but never against it.
TEST(Membership, RestartsAreCountedAgainstOneBudget) {
  Membership m(options());
  const Clock::time_point t0 = Clock::now();
  m.set_world_size(1);
  form(m, t0);
  for (const char* cause : {"preemption", "preemption", "worker_lost", "worker_failed"}) {
    m.end_generation(cause, "", t0);
    EXPECT_FALSE(m.next_restart_exceeds_budget()) << cause;
    EXPECT_EQ(form(m, t0), cause);
  }
  EXPECT_EQ(m.restarts("preemption"), 2);
  EXPECT_EQ(m.counted_restarts(), 2);
  m.end_generation("worker_lost", "", t0);
  EXPECT_TRUE(m.next_restart_exceeds_budget());  // a third against max_restarts 2
  EXPECT_EQ(m.restart_budget_key(), "cluster.max_restarts");
  EXPECT_EQ(m.restart_budget_hint(), "cluster.max_restarts in the job config");
  m.end_generation("preemption", "", t0);  // nothing runs: no change
  m.set_launcher_budget(10);
  EXPECT_FALSE(m.next_restart_exceeds_budget());
  EXPECT_EQ(m.restart_budget(), 10);
  EXPECT_EQ(m.restart_budget_key(), "lorafleet-launch --max-restarts");
  m.set_launcher_budget(std::nullopt);  // a later group without one keeps the last given
  EXPECT_EQ(m.restart_budget(), 10);
}

TEST(Membership, LeasesExpireAndStallsAreReportedOncePerSilence) {
  Membership m(options());
  const Clock::time_point t0 = Clock::now();
  m.set_world_size(3);
  form(m, t0);
  m.rank(2).finished = true;  // a finished rank holds no lease
  m.rank(0).last_seen = t0 + seconds(100);
  EXPECT_TRUE(m.is_alive(0, t0 + seconds(110)));
  EXPECT_FALSE(m.is_alive(1, t0 + seconds(31)));
  EXPECT_EQ(m.newly_stalled(t0 + seconds(59)), std::vector<int>{});
  EXPECT_EQ(m.newly_stalled(t0 + seconds(61)), std::vector<int>{1});
  EXPECT_EQ(m.newly_stalled(t0 + seconds(62)), std::vector<int>{});  // once per silence
  EXPECT_EQ(m.expired_lease(t0 + seconds(119)), std::nullopt);
  EXPECT_EQ(m.expired_lease(t0 + seconds(120)), std::optional<int>(1));
  m.end_generation("worker_lost", "rank 1 silent", t0 + seconds(120));
  EXPECT_EQ(m.expired_lease(t0 + seconds(500)), std::nullopt);  // none runs
}

TEST(Membership, RestoreContinuesARunningOrEndedGeneration) {
  const Clock::time_point t0 = Clock::now();
  Membership running(options());
  running.set_world_size(2);
  running.restore_counters(4, {{"worker_lost", 1}, {"preemption", 2}});
  running.rank(0).registered = running.rank(1).registered = true;
  running.restore_running(t0);
  EXPECT_TRUE(running.running());
  EXPECT_EQ(running.generation(), 4u);
  EXPECT_EQ(running.counted_restarts(), 1);
  EXPECT_EQ(running.check_generation(4, 1, "X"), std::nullopt);
  EXPECT_EQ(running.expired_lease(t0 + seconds(119)), std::nullopt);  // leases restart at t0

  Membership ended(options());
  ended.set_world_size(2);
  ended.restore_counters(4, {});
  ended.restore_ended("rank_restarted", "the coordinator restarted", t0);
  EXPECT_FALSE(ended.running());
  EXPECT_EQ(ended.rendezvous_deadline(), t0 + seconds(300));
  EXPECT_EQ(ended.check_generation(4, 0, "X")->code, Refusal::Code::kAborted);
}

TEST(CheckpointCommits, AStepCommitsWhenEveryRankReportedIt) {
  CheckpointCommits c;
  EXPECT_EQ(c.last_committed_step(), -1);
  EXPECT_EQ(c.report(1, 10, "/ckpt/rank1-view", 2), CheckpointCommits::Report::kPending);
  EXPECT_EQ(c.report(1, 5, "/old", 2), CheckpointCommits::Report::kPending);
  EXPECT_EQ(c.report(0, 10, "/ckpt/step-10", 2), CheckpointCommits::Report::kComplete);
  EXPECT_EQ(c.path_of(10), "/ckpt/step-10");  // rank 0's path names it
  c.commit(10);
  EXPECT_EQ(c.last_committed_step(), 10);
  EXPECT_EQ(c.last_committed_path(), "/ckpt/step-10");
  EXPECT_EQ(c.path_of(5), "");  // the older pending step was dropped
  EXPECT_EQ(c.report(1, 10, "/x", 2), CheckpointCommits::Report::kAlreadyCommitted);
  // A failed record takes the last report back; the rank's retry completes it.
  EXPECT_EQ(c.report(0, 12, "/ckpt/step-12", 2), CheckpointCommits::Report::kPending);
  EXPECT_EQ(c.report(1, 12, "/x", 2), CheckpointCommits::Report::kComplete);
  c.withdraw(1, 12);
  EXPECT_EQ(c.report(1, 12, "/x", 2), CheckpointCommits::Report::kComplete);
  // A new generation drops what was pending.
  c.drop_pending();
  EXPECT_EQ(c.report(0, 12, "/ckpt/step-12", 2), CheckpointCommits::Report::kPending);
  c.clear();
  EXPECT_EQ(c.last_committed_step(), -1);
}

}  // namespace
}  // namespace lf
