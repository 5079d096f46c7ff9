// Prometheus metrics: exact text exposition output of the prometheus-cpp-shaped API, family and
// histogram semantics, lock-free updates under threads, and the HTTP Exposer (checked with
// promtool when it is installed).
#include <gtest/gtest.h>

// The system cpp-httplib is a compiled library built with these (pkg-config --cflags
// cpp-httplib); the client classes must be declared the same way here.
#define CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#include <httplib.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics/exposer.h"
#include "common/metrics/registry.h"

namespace lf {
namespace metrics {
namespace {

// A registry with one family of each type, filled with exactly representable values.
std::shared_ptr<Registry> make_registry() {
  auto registry = std::make_shared<Registry>();
  auto& steps = BuildCounter()
                    .Name("trainer_steps_total")
                    .Help("Optimizer steps taken.")
                    .Labels({{"job", "lora"}})
                    .Register(*registry);
  Counter& rank0 = steps.Add({{"rank", "0"}});
  Counter& rank1 = steps.Add({{"rank", "1"}});
  rank0.Increment();
  rank0.Increment(2.5);
  rank1.Increment();
  rank1.Increment(-5);  // ignored, as in prometheus-cpp
  BuildCounter().Name("trainer_bytes_total").Help("Unused family.").Register(*registry);
  BuildGauge()
      .Name("trainer_loss")
      .Help("Last step loss.\nBackslash \\ kept.")
      .Register(*registry)
      .Add({})
      .Set(0.125);
  Gauge& world = BuildGauge()
                     .Name("coordinator_world_size")
                     .Help("Workers in the job.")
                     .Register(*registry)
                     .Add({{"note", "quote \" backslash \\ newline \n end"}});
  world.Set(4);
  world.Increment();
  world.Decrement(2);
  BuildGauge().Name("trainer_big").Help("Large values.").Register(*registry).Add({}).Set(1e21);
  Histogram& step = BuildHistogram()
                        .Name("trainer_step_duration_seconds")
                        .Help("Wall time per optimizer step.")
                        .Register(*registry)
                        .Add({{"rank", "0"}}, Histogram::BucketBoundaries{0.1, 0.5, 1, 5});
  for (double v : {0.0625, 0.125, 0.25, 0.5, 2.0, 7.0}) step.Observe(v);
  return registry;
}

const char* kExpected =
    "# HELP trainer_steps_total Optimizer steps taken.\n"
    "# TYPE trainer_steps_total counter\n"
    "trainer_steps_total{job=\"lora\",rank=\"0\"} 3.5\n"
    "trainer_steps_total{job=\"lora\",rank=\"1\"} 1\n"
    "# HELP trainer_loss Last step loss.\\nBackslash \\\\ kept.\n"
    "# TYPE trainer_loss gauge\n"
    "trainer_loss 0.125\n"
    "# HELP coordinator_world_size Workers in the job.\n"
    "# TYPE coordinator_world_size gauge\n"
    "coordinator_world_size{note=\"quote \\\" backslash \\\\ newline \\n end\"} 3\n"
    "# HELP trainer_big Large values.\n"
    "# TYPE trainer_big gauge\n"
    "trainer_big 1e+21\n"
    "# HELP trainer_step_duration_seconds Wall time per optimizer step.\n"
    "# TYPE trainer_step_duration_seconds histogram\n"
    "trainer_step_duration_seconds_bucket{rank=\"0\",le=\"0.1\"} 1\n"
    "trainer_step_duration_seconds_bucket{rank=\"0\",le=\"0.5\"} 4\n"
    "trainer_step_duration_seconds_bucket{rank=\"0\",le=\"1\"} 4\n"
    "trainer_step_duration_seconds_bucket{rank=\"0\",le=\"5\"} 5\n"
    "trainer_step_duration_seconds_bucket{rank=\"0\",le=\"+Inf\"} 6\n"
    "trainer_step_duration_seconds_sum{rank=\"0\"} 9.9375\n"
    "trainer_step_duration_seconds_count{rank=\"0\"} 6\n";

bool have_promtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

// Runs `promtool check metrics < body`; returns its exit status and output.
int promtool_check(const std::string& body, std::string* output) {
  char path[] = "/tmp/lf_metrics_XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return -1;
  ::close(fd);
  std::ofstream(path, std::ios::binary) << body;
  const std::string out_path = std::string(path) + ".out";
  const std::string cmd =
      std::string("promtool check metrics < ") + path + " > " + out_path + " 2>&1";
  int status = std::system(cmd.c_str());
  std::ifstream in(out_path);
  std::stringstream ss;
  ss << in.rdbuf();
  *output = ss.str();
  std::remove(path);
  std::remove(out_path.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Metrics, SerializeExactText) { EXPECT_EQ(make_registry()->Serialize(), kExpected); }

TEST(Metrics, FormatValue) {
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(100000), "100000");
  EXPECT_EQ(FormatValue(1234567), "1234567");
  EXPECT_EQ(FormatValue(0.0001), "0.0001");
  EXPECT_EQ(FormatValue(0.00001), "1e-05");
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(-0.0), "-0");
  EXPECT_EQ(FormatValue(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(Metrics, FamilyAddReturnsStableObjects) {
  Registry registry;
  auto& family = BuildGauge().Name("g").Help("h").Register(registry);
  Gauge& a = family.Add({{"rank", "0"}});
  Gauge& b = family.Add({{"rank", "1"}});
  for (int i = 2; i < 100; ++i) family.Add({{"rank", std::to_string(i)}});
  EXPECT_EQ(&family.Add({{"rank", "0"}}), &a);  // same labels, same object, after growth
  a.Set(7);
  EXPECT_EQ(b.Value(), 0);
  EXPECT_TRUE(family.Has({{"rank", "1"}}));
  family.Remove(&b);
  EXPECT_FALSE(family.Has({{"rank", "1"}}));
  EXPECT_EQ(&BuildGauge().Name("g").Help("h").Register(registry), &family);  // merge
  EXPECT_EQ(a.Value(), 7);
}

TEST(Metrics, RejectsInvalidNamesAndClashes) {
  Registry registry;
  EXPECT_THROW(BuildCounter().Name("9bad").Register(registry), std::invalid_argument);
  EXPECT_THROW(BuildCounter().Name("has-dash").Register(registry), std::invalid_argument);
  auto& family =
      BuildCounter().Name("ok_total").Help("h").Labels({{"job", "x"}}).Register(registry);
  EXPECT_THROW(family.Add({{"job", "y"}}), std::invalid_argument);  // constant label clash
  EXPECT_THROW(family.Add({{"__reserved", "y"}}), std::invalid_argument);
  EXPECT_THROW(family.Add({{"bad-name", "y"}}), std::invalid_argument);
  EXPECT_THROW(family.Add({{"v", "\xff"}}), std::invalid_argument);  // not UTF-8
  try {
    BuildGauge().Name("ok_total").Help("h").Labels({{"job", "x"}}).Register(registry);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'ok_total'"), std::string::npos) << e.what();
  }
  auto& hist = BuildHistogram().Name("h_seconds").Help("h").Register(registry);
  EXPECT_THROW(hist.Add({{"le", "1"}}, Histogram::BucketBoundaries{1}), std::invalid_argument);
}

TEST(Metrics, HistogramBuckets) {
  EXPECT_THROW(Histogram({1, 1}), std::invalid_argument);
  EXPECT_THROW(Histogram({2, 1}), std::invalid_argument);
  EXPECT_THROW(Histogram({std::nan("")}), std::invalid_argument);
  Histogram h({1, 2});
  h.Observe(1);  // le is inclusive
  h.Observe(1.5);
  h.Observe(std::nan(""));  // only in +Inf
  h.Observe(-3);
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(h.Count(), 4u);
  EXPECT_TRUE(std::isnan(h.Sum()));
  Histogram with_inf({0.5, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(with_inf.bucket_boundaries(), std::vector<double>{0.5});  // +Inf is implicit
}

TEST(Metrics, ConcurrentUpdatesAreExact) {
  Registry registry;
  Counter& c = BuildCounter().Name("c_total").Help("h").Register(registry).Add({});
  Gauge& g = BuildGauge().Name("g").Help("h").Register(registry).Add({});
  Histogram& h = BuildHistogram().Name("h").Help("h").Register(registry).Add({}, {10.0});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) {
        c.Increment();
        g.Increment(0.5);
        h.Observe(i % 2 ? 1.0 : 20.0);
      }
    });
  }
  std::thread scraper([&] {
    for (int i = 0; i < 50; ++i) registry.Serialize();
  });
  for (auto& t : threads) t.join();
  scraper.join();
  EXPECT_EQ(c.Value(), 200000);
  EXPECT_EQ(g.Value(), 100000);
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{100000, 200000}));
  EXPECT_EQ(h.Sum(), 100000 * 1.0 + 100000 * 20.0);
}

TEST(Metrics, SetToCurrentTime) {
  Gauge g;
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  g.SetToCurrentTime();
  const double after =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GE(g.Value(), before);
  EXPECT_LE(g.Value(), after);
}

TEST(Metrics, PromtoolAcceptsSerializedText) {
  if (!have_promtool()) GTEST_SKIP() << "promtool not on PATH";
  std::string output;
  EXPECT_EQ(promtool_check(kExpected, &output), 0) << output;
  // And it does catch problems: a counter without _total fails the lint.
  Registry bad;
  BuildCounter().Name("steps").Help("h").Register(bad).Add({}).Increment();
  EXPECT_NE(promtool_check(bad.Serialize(), &output), 0);
  EXPECT_NE(output.find("counter metrics should have \"_total\" suffix"), std::string::npos)
      << output;
}

TEST(Exposer, ServesMetricsOverHttp) {
  auto registry = make_registry();
  Exposer exposer("127.0.0.1:0");
  ASSERT_GT(exposer.port(), 0);
  exposer.RegisterCollectable(registry);
  httplib::Client client("127.0.0.1", exposer.port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(res->body, kExpected);

  auto missing = client.Get("/");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto post = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);

  // Live values: the next scrape sees updates made through kept references.
  registry->Add<Gauge>("trainer_loss", "Last step loss.\nBackslash \\ kept.", {}).Add({}).Set(2);
  auto again = client.Get("/metrics");
  ASSERT_TRUE(again);
  EXPECT_NE(again->body.find("\ntrainer_loss 2\n"), std::string::npos);

  if (have_promtool()) {
    std::string output;
    EXPECT_EQ(promtool_check(again->body, &output), 0) << output;
  }

  // Registries are held weakly.
  registry.reset();
  auto empty = client.Get("/metrics");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 200);
  EXPECT_EQ(empty->body, "");
}

// The endpoint is read-only: GET and HEAD only; every method that could change state gets 405
// naming the allowed ones, and nothing it sends changes what the next scrape returns.
TEST(Exposer, IsReadOnly) {
  auto registry = make_registry();
  Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(registry);
  httplib::Client client("127.0.0.1", exposer.port());
  auto head = client.Head("/metrics");
  ASSERT_TRUE(head) << httplib::to_string(head.error());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
  for (const std::string method : {"POST", "PUT", "PATCH", "DELETE"}) {
    httplib::Result res = method == "POST"    ? client.Post("/metrics", "x 1\n", "text/plain")
                          : method == "PUT"   ? client.Put("/metrics", "x 1\n", "text/plain")
                          : method == "PATCH" ? client.Patch("/metrics", "x 1\n", "text/plain")
                                              : client.Delete("/metrics");
    ASSERT_TRUE(res) << method << ": " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 405) << method;
    EXPECT_EQ(res->get_header_value("Allow"), "GET, HEAD") << method;
  }
  // Other paths are not served at all, whatever the method.
  for (const char* path : {"/", "/healthz", "/metrics/x", "/admin"}) {
    auto get = client.Get(path);
    ASSERT_TRUE(get) << path;
    EXPECT_EQ(get->status, 404) << path;
    auto post = client.Post(path, "x", "text/plain");
    ASSERT_TRUE(post) << path;
    EXPECT_EQ(post->status, 404) << path;
  }
  auto options = client.Options("/metrics");
  ASSERT_TRUE(options);
  EXPECT_GE(options->status, 400);
  auto after = client.Get("/metrics");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->body, kExpected);
}

TEST(Exposer, ServesExtraRoutesBesideMetrics) {
  std::vector<HttpRoute> routes;
  routes.push_back({"GET", "/", [](const HttpRequest& r) {
                      HttpReply reply;
                      reply.body = "page " + (r.params.count("q") ? r.params.at("q") : "");
                      return reply;
                    }});
  routes.push_back({"GET", "/files/", [](const HttpRequest& r) {
                      HttpReply reply;
                      reply.body = r.path;
                      return reply;
                    }});
  routes.push_back({"POST", "/api/v1.act", [](const HttpRequest& r) {
                      HttpReply reply;
                      reply.status = 201;
                      reply.headers.push_back({"X-Seen", r.headers.count("x-token") ? "1" : "0"});
                      return reply;
                    }});
  Exposer exposer("127.0.0.1:0", 2, std::move(routes));
  httplib::Client client("127.0.0.1", exposer.port());
  EXPECT_EQ(client.Get("/?q=a%20b")->body, "page a b");
  EXPECT_EQ(client.Get("/files/a.png")->body, "/files/a.png");
  EXPECT_EQ(client.Get("/files/a/b.png")->status, 404);  // one name below the prefix only
  EXPECT_EQ(client.Get("/files/")->status, 404);
  EXPECT_EQ(client.Get("/other")->status, 404);  // "/" is exact
  auto posted = client.Post("/api/v1.act", {{"X-Token", "t"}}, "", "text/plain");
  EXPECT_EQ(posted->status, 201);
  EXPECT_EQ(posted->get_header_value("X-Seen"), "1");  // header names arrive in lower case
  EXPECT_EQ(client.Post("/api/v1xact", "", "text/plain")->status, 404);  // '.' is literal
  EXPECT_EQ(client.Get("/metrics")->status, 200);
}

TEST(Exposer, CombinesRegistriesAndRemoves) {
  auto a = std::make_shared<Registry>();
  auto b = std::make_shared<Registry>();
  BuildGauge().Name("a_value").Help("a").Register(*a).Add({}).Set(1);
  BuildGauge().Name("b_value").Help("b").Register(*b).Add({}).Set(2);
  Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(a);
  exposer.RegisterCollectable(b);
  EXPECT_EQ(exposer.Collect(),
            "# HELP a_value a\n# TYPE a_value gauge\na_value 1\n"
            "# HELP b_value b\n# TYPE b_value gauge\nb_value 2\n");
  exposer.RemoveCollectable(a);
  EXPECT_EQ(exposer.Collect(), "# HELP b_value b\n# TYPE b_value gauge\nb_value 2\n");
}

TEST(Exposer, BindFailuresNameTheAddress) {
  Exposer first("127.0.0.1:0");
  const std::string taken = "127.0.0.1:" + std::to_string(first.port());
  try {
    Exposer second(taken);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot bind " + taken), std::string::npos) << e.what();
  }
  try {
    Exposer bad("no-port-here");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot bind no-port-here"), std::string::npos);
  }
}

}  // namespace
}  // namespace metrics
}  // namespace lf
