// lorafleet-launch's supervision loop on tiny shell commands: success, restarts after failures
// with the cause and count passed on, no restart for bad input (exit 3) or a cancel (exit 4),
// max_restarts exhausted, preemptions (exit 143) not counted, the cause being the rank that died
// rather than the one that lost it, and the backoff schedule.
#include "worker/launch/launcher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace lf {
namespace {

namespace fs = std::filesystem;

class Launcher : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lf_launch_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Options running `script` with sh; no backoff so tests are fast.
  LaunchOptions opts(const std::string& script, int nproc = 0) const {
    LaunchOptions o;
    o.nproc = nproc;
    o.command = {"/bin/sh", "-c", script};
    o.backoff_seconds = 0.0;
    o.backoff_max_seconds = 0.0;
    o.stop_grace_seconds = 2.0;
    return o;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(dir_ / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path dir_;
};

TEST_F(Launcher, RunsEveryRankWithItsVariables) {
  const std::string log = (dir_ / "ranks").string();
  EXPECT_EQ(run_launcher(opts("echo \"$LF_RANK/$LF_WORLD_SIZE $LF_RESUME\" >> " + log, 3)), 0);
  const std::string out = read("ranks");
  for (const char* line : {"0/3 auto\n", "1/3 auto\n", "2/3 auto\n"}) {
    EXPECT_NE(out.find(line), std::string::npos) << out;
  }
}

TEST_F(Launcher, RestartsAfterFailuresAndPassesTheCause) {
  // Fails on the first two starts (counted in a file), succeeds on the third.
  const std::string n = (dir_ / "n").string(), causes = (dir_ / "causes").string();
  const std::string script = "c=$(cat " + n + " 2>/dev/null || echo 0); echo $((c+1)) > " + n +
                             "; echo \"$LF_RESTART_COUNT:$LF_RESTART_CAUSE\" >> " + causes +
                             "; [ $c -ge 2 ] || exit 7";
  EXPECT_EQ(run_launcher(opts(script)), 0);
  EXPECT_EQ(read("n"), "3\n");
  EXPECT_EQ(read("causes"), "0:\n1:/bin/sh exited with code 7\n2:/bin/sh exited with code 7\n");
}

TEST_F(Launcher, GivesUpWhenMaxRestartsAreExhausted) {
  LaunchOptions o = opts("echo x >> " + (dir_ / "starts").string() + "; exit 9");
  o.max_restarts = 2;
  EXPECT_EQ(run_launcher(o), 9);
  EXPECT_EQ(read("starts"), "x\nx\nx\n");  // the first start and 2 restarts
}

// One budget: given --max-restarts, the launcher hands it to every member (LF_MAX_RESTARTS),
// which give it to the coordinator; without it the members see none, and the launcher keeps
// restarting failures until the coordinator's cluster.max_restarts refuses the group (the
// members then exit 3), here on the fifth start: past the old default of 3.
TEST_F(Launcher, OneRestartBudget) {
  const std::string budgets = (dir_ / "budgets").string();
  LaunchOptions o = opts("echo \"${LF_MAX_RESTARTS:-unset}\" >> " + budgets + "; exit 9");
  o.max_restarts = 1;
  EXPECT_EQ(run_launcher(o), 9);
  EXPECT_EQ(read("budgets"), "1\n1\n");  // the start and 1 restart

  const std::string n = (dir_ / "n").string();
  LaunchOptions job = opts("c=$(cat " + n + " 2>/dev/null || echo 0); echo $((c+1)) > " + n +
                           "; echo \"${LF_MAX_RESTARTS:-unset}\" >> " + budgets +
                           "; [ $c -ge 4 ] && exit 3; exit 7");
  ASSERT_FALSE(job.max_restarts.has_value());
  unsetenv("LF_MAX_RESTARTS");
  fs::remove(budgets);
  EXPECT_EQ(run_launcher(job), 3);
  EXPECT_EQ(read("n"), "5\n");
  EXPECT_EQ(read("budgets"), "unset\nunset\nunset\nunset\nunset\n");
}

TEST_F(Launcher, BadInputIsNotRetried) {
  EXPECT_EQ(run_launcher(opts("echo x >> " + (dir_ / "starts").string() + "; exit 3")), 3);
  EXPECT_EQ(read("starts"), "x\n");
}

TEST_F(Launcher, ACancelledJobIsNotRetried) {
  // Exit 4: an operator cancelled the job (lorafleet-ctl cancel).
  EXPECT_EQ(run_launcher(opts("echo x >> " + (dir_ / "starts").string() + "; exit 4")), 4);
  EXPECT_EQ(read("starts"), "x\n");
}

TEST_F(Launcher, PreemptionsDoNotCountAgainstMaxRestarts) {
  // Three preemptions (exit 143) then success, with max_restarts 0.
  const std::string n = (dir_ / "n").string();
  LaunchOptions o = opts("c=$(cat " + n + " 2>/dev/null || echo 0); echo $((c+1)) > " + n +
                         "; [ $c -ge 3 ] || exit 143");
  o.max_restarts = 0;
  EXPECT_EQ(run_launcher(o), 0);
  EXPECT_EQ(read("n"), "4\n");
}

// The members restarted after a preemption get the cause "preemption", the label the
// coordinator does not count against the same budget: a group SIGTERMed while it loads exits
// 143 without reporting a preemption, and its next generation must not cost a restart there.
TEST_F(Launcher, APreemptionIsHandedOnAsTheCausePreemption) {
  const std::string n = (dir_ / "n").string(), causes = (dir_ / "causes").string();
  LaunchOptions o = opts("c=$(cat " + n + " 2>/dev/null || echo 0); echo $((c+1)) > " + n +
                         "; echo \"$LF_RESTART_COUNT:$LF_RESTART_CAUSE\" >> " + causes +
                         "; [ $c = 0 ] && kill -TERM $$; [ $c = 1 ] && exit 143; " +
                         "[ $c = 2 ] && exit 9; exit 0");
  o.max_restarts = 1;
  EXPECT_EQ(run_launcher(o), 0);
  EXPECT_EQ(read("causes"), "0:\n1:preemption\n2:preemption\n3:/bin/sh exited with code 9\n");
}

TEST_F(Launcher, AFailedRankStopsTheOthers) {
  // Rank 1 fails at once; rank 0 would run for a minute unless stopped.
  LaunchOptions o = opts("if [ $LF_RANK = 1 ]; then exit 5; fi; sleep 60", 2);
  o.max_restarts = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(run_launcher(o), 5);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST_F(Launcher, TheCauseIsTheRankThatDiedNotTheOneThatLostItsPeer) {
  // First start: rank 1 is SIGKILLed and rank 0 then exits 75 (peer lost), both within one poll;
  // the restart's cause names rank 1. The second start succeeds.
  const std::string mark = (dir_ / "died").string(), causes = (dir_ / "causes").string();
  const std::string script = "echo \"$LF_RANK:$LF_RESTART_CAUSE\" >> " + causes +
                             "; [ \"$LF_RESTART_COUNT\" = 0 ] || exit 0; " +
                             "if [ $LF_RANK = 1 ]; then touch " + mark + "; kill -9 $$; fi; " +
                             "while [ ! -e " + mark + " ]; do sleep 0.001; done; exit 75";
  EXPECT_EQ(run_launcher(opts(script, 2)), 0);
  const std::string out = read("causes");
  EXPECT_NE(out.find("0:rank 1 killed by signal 9"), std::string::npos) << out;
  EXPECT_EQ(out.find("exited with code 75"), std::string::npos) << out;
}

TEST(LauncherBackoff, DoublesUpToTheCap) {
  LaunchOptions o;
  o.backoff_seconds = 2.0;
  o.backoff_max_seconds = 10.0;
  EXPECT_DOUBLE_EQ(restart_backoff(o, 1), 2.0);
  EXPECT_DOUBLE_EQ(restart_backoff(o, 2), 4.0);
  EXPECT_DOUBLE_EQ(restart_backoff(o, 3), 8.0);
  EXPECT_DOUBLE_EQ(restart_backoff(o, 4), 10.0);
}

}  // namespace
}  // namespace lf
