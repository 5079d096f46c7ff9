// Operator control of a job (issue 13), in-process: OperatorControl's rules, the bounded
// ProgressHistory, and lorafleet.v1.JobControl through lorafleet-ctl's own code (ctl_main)
// against a real CoordinatorServer with a job token and a real worker client: status as text
// and JSON, stop reaching the worker in its heartbeat answer and ending the job with exit 0,
// cancel while registering ending it with exit 4, sample-now refused without prompts, and a
// wrong token refused with UNAUTHENTICATED (exit 3). The status page's HTTP routes: token
// guard (401, the ?token= cookie), HTML and JSON, the forms, another site's Origin refused.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/config/job_config.h"
#include "common/util/exit_codes.h"
#include "coordinator/ctl/ctl_app.h"
#include "coordinator/operator_control.h"
#include "coordinator/progress_history.h"
#include "coordinator/server.h"
#include "coordinator/status_page.h"
#include "worker/rpc/coordinator_client.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

const char* kPhotos = LF_SOURCE_DIR "/.deps/skimage/usr/lib/python3/dist-packages/skimage/data";
const char* kToken = "lf-ctl-test-token-31d5e8a2";

// ---- OperatorControl ---------------------------------------------------------------------

TEST(OperatorControl, StopCancelAndSampleNowRules) {
  OperatorControl c(/*sample_prompts=*/true);
  EXPECT_TRUE(c.request_sample_now("a").accepted);
  EXPECT_TRUE(c.request_sample_now("a").accepted);
  EXPECT_EQ(c.requests().sample_now, 2);  // one sampling per request
  const OperatorControl::Outcome stop = c.request_stop("ctl on host-a");
  EXPECT_TRUE(stop.accepted);
  EXPECT_TRUE(c.requests().stop);
  EXPECT_EQ(c.requests().reason, "stop asked by ctl on host-a");
  EXPECT_TRUE(c.request_stop("b").accepted);  // a second stop changes nothing
  EXPECT_EQ(c.requests().reason, "stop asked by ctl on host-a");
  // The job is ending: no more sampling.
  EXPECT_FALSE(c.request_sample_now("a").accepted);
  EXPECT_EQ(c.requests().sample_now, 2);
  // A cancel overrides the stop; a stop after it is refused.
  const auto t0 = OperatorControl::Clock::now();
  EXPECT_TRUE(c.request_cancel("c", t0).accepted);
  EXPECT_TRUE(c.requests().cancel);
  EXPECT_FALSE(c.requests().stop);
  EXPECT_FALSE(c.request_stop("d").accepted);
  EXPECT_FALSE(c.cancel_overdue(t0 + std::chrono::seconds(14), std::chrono::seconds(15)));
  EXPECT_TRUE(c.cancel_overdue(t0 + std::chrono::seconds(15), std::chrono::seconds(15)));
  c.job_ended();
  EXPECT_FALSE(c.request_cancel("e").accepted);
}

TEST(OperatorControl, RefusesWithoutPromptsAndAfterTheEnd) {
  OperatorControl c(/*sample_prompts=*/false);
  const OperatorControl::Outcome o = c.request_sample_now("a");
  EXPECT_FALSE(o.accepted);
  EXPECT_NE(o.detail.find("output.sample_prompts"), std::string::npos) << o.detail;
  c.job_ended();
  EXPECT_FALSE(c.request_stop("a").accepted);
  EXPECT_EQ(c.request_stop("a").detail, "the job has already ended");
}

// ---- ProgressHistory ---------------------------------------------------------------------

TEST(ProgressHistory, StaysBoundedAndCoversTheRunEvenly) {
  ProgressHistory h(8);
  for (int step = 1; step <= 100; ++step) h.add({step, 1.0 / step, 1e-3});
  // 100 steps into 8 slots: the stride doubled to 16, points at 16, 32, 48, 64, 80, 96.
  ASSERT_LE(h.points().size(), 8u);
  EXPECT_EQ(h.stride(), 16);
  std::vector<std::int64_t> steps;
  for (const ProgressPoint& p : h.points()) steps.push_back(p.global_step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{16, 32, 48, 64, 80, 96}));
  EXPECT_DOUBLE_EQ(h.points().front().loss, 1.0 / 16);
}

TEST(ProgressHistory, ARepeatedOrReRunStepReplacesTheLaterPoints) {
  ProgressHistory h(16);
  for (int step = 1; step <= 6; ++step) h.add({step, 1.0, 0.0});
  h.add({6, 2.0, 0.0});  // the heartbeat repeats step 6 (same value in practice)
  h.add({4, 3.0, 0.0});  // a restarted group re-runs steps after its checkpoint at 3
  ASSERT_EQ(h.points().size(), 4u);
  EXPECT_EQ(h.points().back().global_step, 4);
  EXPECT_DOUBLE_EQ(h.points().back().loss, 3.0);
}

// ---- JobControl through lorafleet-ctl ------------------------------------------------------

struct CtlResult {
  int exit_code = 0;
  std::string out;
  std::string err;
};

// Runs lorafleet-ctl's main with `args` (after the program name), capturing its output.
CtlResult ctl(const std::vector<std::string>& args) {
  std::vector<std::string> storage = {"lorafleet-ctl"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  CtlResult r;
  r.exit_code = ctl_main(static_cast<int>(storage.size()), argv.data());
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

class JobControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lf_job_control_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "train/2_photo");
    for (const char* stem : {"astronaut", "chelsea"}) {
      fs::copy_file(std::string(kPhotos) + "/" + stem + ".png",
                    root_ / "train/2_photo" / (std::string(stem) + ".png"));
      std::ofstream(root_ / "train/2_photo" / (std::string(stem) + ".txt")) << "a photo\n";
    }
    {
      std::ofstream f(root_ / "model.safetensors", std::ios::binary);
      const char header_len[8] = {8, 0, 0, 0, 0, 0, 0, 0};
      f.write(header_len, 8);
      f << "{}      ";
    }
    std::ofstream(root_ / "vocab.txt.gz") << "placeholder";
    std::ofstream(root_ / "token") << kToken << "\n";
    std::ofstream(root_ / "wrong") << "not-the-token\n";
    if (const char* old = std::getenv("LF_JOB_TOKEN")) old_env_ = old;
    unsetenv("LF_JOB_TOKEN");
  }
  void TearDown() override {
    if (old_env_) setenv("LF_JOB_TOKEN", old_env_->c_str(), 1);
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  JobConfig config(const std::string& metrics = "\"\"", bool token = true) const {
    const std::string r = root_.string();
    std::ostringstream y;
    y << "model:\n"
      << "  pretrained_model_name_or_path: " << r << "/model.safetensors\n"
      << "  tokenizer_vocab: " << r << "/vocab.txt.gz\n"
      << "dataset:\n"
      << "  train_data_dir: " << r << "/train\n"
      << "  resolution: 256\n"
      << "  caption_extension: .txt\n"
      << "training:\n"
      << "  max_train_steps: 10\n"
      << "output:\n"
      << "  output_dir: " << r << "/out\n"
      << "coordinator:\n"
      << "  listen_address: 127.0.0.1:0\n"
      << "  metrics_address: " << metrics << "\n";
    if (token) y << "  job_token_file: " << r << "/token\n";
    return parse_job_config(y.str(), "ctl.yaml");
  }
  static CoordinatorOptions options() {
    CoordinatorOptions o;
    o.world_size = 1;
    o.service.registration_timeout = std::chrono::seconds(10);
    o.service.tick = std::chrono::milliseconds(50);
    o.state_path = "";
    return o;
  }
  std::vector<std::string> base(const CoordinatorServer& s, const char* token = "token") const {
    return {"--coordinator", s.address(), "--job-token-file", (root_ / token).string()};
  }
  std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  fs::path root_;
  std::optional<std::string> old_env_;
};

TEST_F(JobControlTest, WrongTokenIsUnauthenticated) {
  CoordinatorServer server(config(), options());
  server.start();
  const CtlResult r = ctl(with(base(server, "wrong"), {"status"}));
  EXPECT_EQ(r.exit_code, kExitBadInput);
  EXPECT_NE(r.err.find("UNAUTHENTICATED"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not-the-token"), std::string::npos) << r.err;  // never echoed
  const CtlResult stop = ctl(with(base(server, "wrong"), {"stop"}));
  EXPECT_EQ(stop.exit_code, kExitBadInput);
  // Nothing was recorded: the job is still just registering.
  const CtlResult ok = ctl(with(base(server), {"status", "--json"}));
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const nlohmann::json j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j["state"], "registering");
  EXPECT_EQ(j["operator_request"], "");
}

TEST_F(JobControlTest, StopReachesTheWorkerInItsHeartbeatAndEndsTheJobWithExit0) {
  CoordinatorServer server(config(), options());
  server.start();
  CoordinatorClient client(server.address(), ClientSecurity{kToken, "", ""});
  WorkerIdentity me;
  me.hostname = "testhost";
  const JobAssignment job = client.register_worker(me, 10);
  EXPECT_EQ(job.sample_now_id, 0);
  ProgressUpdate p;
  p.global_step = 3;
  p.loss = 0.25;
  p.learning_rate = 1e-4;
  p.step_seconds = 2.0;
  p.samples_per_second = 1.5;
  p.validation_loss = 0.125;  // a validation ran after step 3
  p.validation_step = 3;
  client.report_progress_async(p);
  // The report is asynchronous: wait until the coordinator has it.
  nlohmann::json j;
  for (int i = 0; i < 100; ++i) {
    const CtlResult r = ctl(with(base(server), {"status", "--json"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    if (j["global_step"] == "3") break;  // int64 is a JSON string in protobuf's mapping
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["global_step"], "3");
  EXPECT_EQ(j["max_train_steps"], "10");
  EXPECT_DOUBLE_EQ(j["loss"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["eta_seconds"].get<double>(), 14.0);  // 7 steps left x 2 s
  EXPECT_EQ(j["last_committed_step"], "-1");
  ASSERT_EQ(j["ranks"].size(), 1u);
  EXPECT_EQ(j["ranks"][0]["state"], "training");
  EXPECT_EQ(j["ranks"][0]["hostname"], "testhost");
  ASSERT_EQ(j["history"].size(), 1u);
  EXPECT_EQ(j["history"][0]["global_step"], "3");
  EXPECT_EQ(j["validation_step"], "3");
  EXPECT_DOUBLE_EQ(j["validation_loss"].get<double>(), 0.125);
  ASSERT_EQ(j["validation_history"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["validation_history"][0]["loss"].get<double>(), 0.125);
  const CtlResult text = ctl(with(base(server), {"status"}));
  EXPECT_NE(text.out.find("ctl.yaml: running"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("global_step 3/10"), std::string::npos) << text.out;

  // No sample prompts in this job: sample-now is refused, exit 1.
  const CtlResult sample = ctl(with(base(server), {"sample-now"}));
  EXPECT_EQ(sample.exit_code, 1);
  EXPECT_NE(sample.err.find("output.sample_prompts"), std::string::npos) << sample.err;

  const CtlResult stop = ctl(with(base(server), {"stop"}));
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_NE(stop.out.find("commit a checkpoint"), std::string::npos) << stop.out;
  // The next heartbeat answer carries it.
  p.global_step = 4;
  client.report_progress_async(p);
  for (int i = 0; i < 100 && !client.operator_ask().stop; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const OperatorAsk ask = client.operator_ask();
  EXPECT_TRUE(ask.stop);
  EXPECT_FALSE(ask.cancel);
  EXPECT_EQ(ask.reason.rfind("stop asked by lorafleet-ctl on ", 0), 0u) << ask.reason;
  EXPECT_EQ(nlohmann::json::parse(ctl(with(base(server), {"status", "--json"})).out)["state"],
            "stopping");

  // The rank stops after committing a checkpoint (as the trainer does) and finishes.
  EXPECT_EQ(client.commit_checkpoint(0, 4, (root_ / "out/checkpoints/step-00000004").string(),
                                     std::chrono::seconds(10)),
            CoordinatorClient::CommitAck::kCommitted);
  FinishReport done;
  done.global_step = 4;
  done.stopped = true;
  client.finish(done);
  const std::optional<int> code = server.wait_for(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  j = nlohmann::json::parse(ctl(with(base(server), {"status", "--json"})).out);
  EXPECT_EQ(j["state"], "stopped");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["last_committed_step"], "4");
  EXPECT_EQ(j["ranks"][0]["state"], "stopped");
  EXPECT_NE(j["end_reason"].get<std::string>().find("stopped at global_step 4"), std::string::npos)
      << j["end_reason"];
  // Once ended, later requests are refused.
  EXPECT_EQ(ctl(with(base(server), {"cancel"})).exit_code, 1);
}

TEST_F(JobControlTest, StopBeforeAnyRankTrainedEndsTheJobWithExit0) {
  CoordinatorServer server(config(), options());
  server.start();
  const CtlResult r = ctl(with(base(server), {"stop"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::optional<int> code = server.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  const nlohmann::json j = nlohmann::json::parse(ctl(with(base(server), {"status", "--json"})).out);
  EXPECT_EQ(j["state"], "stopped");
  EXPECT_NE(j["end_reason"].get<std::string>().find("before any rank trained"), std::string::npos)
      << j["end_reason"];
}

TEST_F(JobControlTest, CancelWhileRegisteringEndsTheJobWithExit4) {
  CoordinatorServer server(config(), options());
  server.start();
  const CtlResult r = ctl(with(base(server), {"cancel"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::optional<int> code = server.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, kExitCancelled);
  const nlohmann::json j = nlohmann::json::parse(ctl(with(base(server), {"status", "--json"})).out);
  EXPECT_EQ(j["state"], "cancelled");
  EXPECT_EQ(j["exit_code"], kExitCancelled);
  EXPECT_NE(j["end_reason"].get<std::string>().find("no checkpoint was committed"),
            std::string::npos)
      << j["end_reason"];
}

// ---- the status page -------------------------------------------------------------------

TEST(StatusPage, EscapesTextAndDrawsTheHistory) {
  lorafleet::v1::JobStatus s;
  s.set_job_name("<script>x</script>.yaml");
  s.set_state("running");
  s.set_global_step(7);
  for (int i = 1; i <= 3; ++i) {
    auto* h = s.add_history();
    h->set_global_step(i);
    h->set_loss(1.0 / i);
    h->set_learning_rate(1e-3);
  }
  s.add_history()->set_global_step(4);  // loss 0: still finite, drawn
  const std::string html = render_status_page(s, StatusPageOptions{});
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;x&lt;/script&gt;.yaml"), std::string::npos);
  EXPECT_NE(html.find("<td id=\"global-step\">7</td>"), std::string::npos);
  EXPECT_NE(html.find("id=\"loss-chart\""), std::string::npos);
  EXPECT_EQ(html.find("validation-loss-chart"), std::string::npos);  // no validation points
  EXPECT_NE(html.find("action=\"/api/v1/stop\""), std::string::npos);
  // A chart of 3 points: x from left 60 to 410, the largest y at the top (22).
  const std::string svg =
      svg_line_chart("c", "t", {{0, 2.0}, {1, NAN}, {2, 1.0}, {4, 0.0}}, 420, 200);
  EXPECT_NE(svg.find("points=\"60.0,22.0 235.0,99.0 410.0,176.0 \""), std::string::npos) << svg;
  EXPECT_NE(svg_line_chart("c", "t", {}, 420, 200).find("no data yet"), std::string::npos);
}

TEST_F(JobControlTest, StatusPageNeedsTheTokenAndServesHtmlJsonAndTheForms) {
  CoordinatorServer server(config("127.0.0.1:0"), options());
  server.start();
  ASSERT_GT(server.metrics_port(), 0);
  httplib::Client http("127.0.0.1", server.metrics_port());
  // /metrics stays open for Prometheus; the rest needs the token.
  EXPECT_EQ(http.Get("/metrics")->status, 200);
  EXPECT_EQ(http.Get("/")->status, 401);
  EXPECT_EQ(http.Get("/api/v1/status")->status, 401);
  EXPECT_EQ(http.Post("/api/v1/stop", "", "application/x-www-form-urlencoded")->status, 401);
  EXPECT_EQ(http.Get("/?token=wrong")->status, 401);
  // A browser opens /?token=... once: a cookie, then the page without the token in its address.
  auto login = http.Get(std::string("/?token=") + kToken);
  ASSERT_EQ(login->status, 303);
  EXPECT_EQ(login->get_header_value("Location"), "/");
  const std::string set_cookie = login->get_header_value("Set-Cookie");
  EXPECT_EQ(set_cookie.rfind(std::string("lf_job_token=") + kToken + ";", 0), 0u) << set_cookie;
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos);
  const httplib::Headers with_cookie = {{"Cookie", std::string("lf_job_token=") + kToken}};
  auto page = http.Get("/", with_cookie);
  ASSERT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<span class=\"state\" id=\"state\">registering</span>"),
            std::string::npos);
  EXPECT_NE(page->body.find("<td id=\"max-train-steps\">10</td>"), std::string::npos);
  const httplib::Headers bearer = {{"Authorization", std::string("Bearer ") + kToken}};
  auto json = http.Get("/api/v1/status", bearer);
  ASSERT_EQ(json->status, 200);
  EXPECT_EQ(nlohmann::json::parse(json->body)["state"], "registering");
  // Another site's form cannot post here, even with the cookie: another Origin, a sandboxed
  // frame's "null", or a browser's Sec-Fetch-Site cross-site.
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"Origin", "http://evil.example"},
                                                        {"Origin", "null"},
                                                        {"Sec-Fetch-Site", "cross-site"}}) {
    httplib::Headers cross = with_cookie;
    cross.emplace(name, value);
    EXPECT_EQ(http.Post("/api/v1/stop", cross, "", "application/x-www-form-urlencoded")->status,
              403)
        << name << ": " << value;
  }
  // No sample prompts: refused (409), as JSON for API clients.
  auto sample = http.Post("/api/v1/sample-now", bearer, "", "application/json");
  EXPECT_EQ(sample->status, 409);
  EXPECT_EQ(nlohmann::json::parse(sample->body)["accepted"], false);
  // The page's own form: accepted, an HTML answer that leads back.
  auto stop = http.Post("/api/v1/stop", with_cookie, "", "application/x-www-form-urlencoded");
  ASSERT_EQ(stop->status, 200);
  EXPECT_NE(stop->body.find("<p id=\"outcome\">stop: "), std::string::npos) << stop->body;
  EXPECT_EQ(nlohmann::json::parse(http.Get("/api/v1/status", bearer)->body)["operator_request"],
            "stop");
  // Only PNG names in the sample folder are served.
  EXPECT_EQ(http.Get("/sample/..%2Fstate.sqlite", bearer)->status, 404);
  EXPECT_EQ(http.Get("/sample/missing.png", bearer)->status, 404);
}

TEST_F(JobControlTest, WithoutATokenOnlyLoopbackHostsAreAnswered) {
  CoordinatorServer server(config("127.0.0.1:0", /*token=*/false), options());
  server.start();
  httplib::Client http("127.0.0.1", server.metrics_port());
  EXPECT_EQ(http.Get("/")->status, 200);
  EXPECT_EQ(http.Get("/api/v1/status")->status, 200);
  // A page of another site that rebound its name to 127.0.0.1 sends its own Host.
  const httplib::Headers rebound = {
      {"Host", "evil.example:" + std::to_string(server.metrics_port())}};
  auto page = http.Get("/", rebound);
  EXPECT_EQ(page->status, 403);
  EXPECT_NE(page->body.find("127.0.0.1, [::1] or localhost"), std::string::npos) << page->body;
  httplib::Headers post = rebound;
  post.emplace("Origin", "http://evil.example:" + std::to_string(server.metrics_port()));
  EXPECT_EQ(http.Post("/api/v1/cancel", post, "", "application/x-www-form-urlencoded")->status,
            403);
  EXPECT_EQ(http.Get("/metrics", rebound)->status, 200);  // Prometheus's scrape is unchanged
}

// Without a token, a status page on another address than loopback would be guarded by nothing
// but the Host header a script sets as it likes: such a coordinator serves /metrics only there.
TEST_F(JobControlTest, WithoutATokenANonLoopbackMetricsAddressServesMetricsOnly) {
  CoordinatorServer server(config("0.0.0.0:0", /*token=*/false), options());
  server.start();
  ASSERT_GT(server.metrics_port(), 0);
  httplib::Client http("127.0.0.1", server.metrics_port());
  EXPECT_EQ(http.Get("/metrics")->status, 200);
  EXPECT_EQ(http.Get("/")->status, 404);
  EXPECT_EQ(http.Get("/api/v1/status")->status, 404);
  EXPECT_EQ(http.Post("/api/v1/stop", "", "application/x-www-form-urlencoded")->status, 404);
  EXPECT_EQ(http.Post("/api/v1/cancel", "", "application/x-www-form-urlencoded")->status, 404);
}

}  // namespace
}  // namespace lf
