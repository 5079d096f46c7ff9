// The coordinator's status page in a real browser (issue 13): a 2-rank job (coordinator +
// mpirun workers, tiny model, CPU) with sample images; headless Chromium (Debian's chromium)
// loads http://<metrics address>/ while it trains. The test checks the page's DOM values against
// /api/v1/status (job, state, world size, steps, ranks, the loss curve, the sample image) and
// that Chromium's screenshot of it is not blank, then stops the job with the page's own form
// (an HTML form POST) and the job ends with exit 0.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <string>
#include <thread>

#include "tests/integration/process_util.h"
#include "tests/integration/tiny_job.h"

namespace fs = std::filesystem;

namespace {

using lf::test::free_port;
using lf::test::RunResult;
using Clock = std::chrono::steady_clock;

// The text of the element with id `id` (first match; "" when absent).
std::string element_text(const std::string& dom, const std::string& id) {
  const std::regex re("id=\"" + id + "\"[^>]*>([^<]*)<");
  std::smatch m;
  return std::regex_search(dom, m, re) ? std::string(m[1]) : std::string();
}

class StatusPageJob : public lf::test::TinyJobTest {
 protected:
  std::string chromium(const std::string& what, const std::string& url) const {
    // Its own profile folder: parallel tests must not share one.
    return "timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
           "--user-data-dir=" +
           (dir_ / "chromium-profile").string() + " " + what + " '" + url + "' 2>" +
           (dir_ / "chromium.log").string();
  }
  nlohmann::json status() const {
    const RunResult r =
        lf::test::run("curl -s http://127.0.0.1:" + std::to_string(mport_) + "/api/v1/status");
    return r.exit_code == 0 && !r.output.empty() ? nlohmann::json::parse(r.output, nullptr, false)
                                                 : nlohmann::json();
  }
  int cport_ = 0;
  int mport_ = 0;
};

TEST_F(StatusPageJob, ChromiumShowsTheStatusValuesAndTheFormStopsTheJob) {
  const fs::path prompts = dir_ / "prompts.txt";
  std::ofstream(prompts) << "a photo of a dog --w 64 --h 64 --s 2 --d 3\n";
  const std::string out = (dir_ / "watched").string();
  cport_ = free_port();
  mport_ = free_port();
  const std::string cfg =
      with_output_keys(write_config("watched.yaml", out, 400, 5, cport_, mport_, 0),
                       "  sample_prompts: " + prompts.string() + "\n  sample_every_n_steps: 2\n");
  auto job = std::async(std::launch::async, [&] { return run_job(cfg, cport_, 2, ""); });

  // Wait for a committed checkpoint and a sample image.
  nlohmann::json s;
  const auto until = Clock::now() + std::chrono::seconds(180);
  while (Clock::now() < until) {
    s = status();
    if (s.is_object() && std::stoll(s["last_committed_step"].get<std::string>()) >= 5 &&
        fs::exists(fs::path(out) / "sample") && !fs::is_empty(fs::path(out) / "sample")) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(s.is_object()) << "no /api/v1/status";
  ASSERT_GE(std::stoll(s["last_committed_step"].get<std::string>()), 5) << s.dump();

  const std::string url = "http://127.0.0.1:" + std::to_string(mport_) + "/";
  const RunResult dom = lf::test::run(chromium("--dump-dom", url));
  ASSERT_EQ(dom.exit_code, 0) << lf::test::read_file((dir_ / "chromium.log").string());
  const nlohmann::json after = status();
  const std::string& d = dom.output;
  EXPECT_EQ(element_text(d, "job-name"), after["job_name"].get<std::string>());
  EXPECT_EQ(element_text(d, "state"), "running");
  EXPECT_EQ(after["state"], "running");
  EXPECT_EQ(element_text(d, "world-size"), "2");
  EXPECT_EQ(element_text(d, "max-train-steps"), after["max_train_steps"].get<std::string>());
  // The page was drawn between the two status reads.
  const long long page_step = std::stoll(element_text(d, "global-step"));
  EXPECT_GE(page_step, std::stoll(s["global_step"].get<std::string>()));
  EXPECT_LE(page_step, std::stoll(after["global_step"].get<std::string>()));
  EXPECT_GE(std::stoll(element_text(d, "last-committed-step")), 5);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(element_text(d, "rank-" + std::to_string(r) + "-state"), "training");
    EXPECT_EQ(after["ranks"][r]["state"], "training");
  }
  EXPECT_NE(d.find("id=\"loss-chart\""), std::string::npos);
  EXPECT_NE(d.find("<polyline"), std::string::npos) << "no curve drawn";
  const std::regex img(R"re(<img src="/sample/(e2e_\d{6}_00_\d{14}_3\.png)")re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(d, m, img)) << d;
  EXPECT_TRUE(fs::exists(fs::path(out) / "sample" / std::string(m[1])));
  EXPECT_NE(d.find("action=\"/api/v1/stop\""), std::string::npos);

  // The screenshot is a page, not a blank: several colours, and contrast.
  const fs::path shot = dir_ / "status.png";
  const RunResult sr =
      lf::test::run(chromium("--screenshot=" + shot.string() + " --window-size=1100,1400", url));
  ASSERT_EQ(sr.exit_code, 0) << lf::test::read_file((dir_ / "chromium.log").string());
  const cv::Mat png = cv::imread(shot.string(), cv::IMREAD_COLOR);
  ASSERT_FALSE(png.empty());
  EXPECT_EQ(png.cols, 1100);
  EXPECT_EQ(png.rows, 1400);
  cv::Scalar mean, stddev;
  cv::meanStdDev(png, mean, stddev);
  EXPECT_GT(stddev[0] + stddev[1] + stddev[2], 30.0) << "a blank screenshot";

  // The page's Stop form, as a browser posts it: the job stops with a checkpoint, exit 0.
  const RunResult post = lf::test::run(
      "curl -s -X POST -H 'Content-Type: application/x-www-form-urlencoded' -H 'Origin: "
      "http://127.0.0.1:" +
      std::to_string(mport_) + "' --data '' " + url + "api/v1/stop");
  ASSERT_EQ(post.exit_code, 0);
  EXPECT_NE(post.output.find("<p id=\"outcome\">stop: "), std::string::npos) << post.output;
  RunResult a = job.get();
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("on an operator's request"), std::string::npos) << a.output;
}

}  // namespace
