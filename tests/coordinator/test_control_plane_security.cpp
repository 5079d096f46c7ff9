// Control-plane security, in-process: the job token on every RPC (missing and wrong tokens get
// UNAUTHENTICATED and are logged without the token), cluster mode without a token refusing to
// start, and TLS with a throwaway CA made by the openssl CLI at test time (the right CA works;
// another CA, the system roots, a wrong server name and plaintext all fail).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/config/job_config.h"
#include "common/rendezvous/key_value_store.h"
#include "coordinator/auth.h"
#include "coordinator/server.h"
#include "lorafleet/v1/coordinator.grpc.pb.h"
#include "worker/rpc/client_security.h"
#include "worker/rpc/coordinator_client.h"
#include "worker/rpc/coordinator_rendezvous.h"

namespace fs = std::filesystem;
namespace pb = lorafleet::v1;

namespace lf {
namespace {

const char* kPhotos = LF_SOURCE_DIR "/.deps/skimage/usr/lib/python3/dist-packages/skimage/data";
// Distinctive enough that finding it anywhere in captured output means it leaked.
const char* kToken = "lf-test-token-5b1e0c9d7a3f4e2b8c6d";

std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Unsets LF_JOB_TOKEN for the scope (a developer's shell may export one) and restores it.
class ScopedTokenEnv {
 public:
  explicit ScopedTokenEnv(const char* value = nullptr) {
    if (const char* old = std::getenv("LF_JOB_TOKEN")) old_ = old;
    if (value) {
      setenv("LF_JOB_TOKEN", value, 1);
    } else {
      unsetenv("LF_JOB_TOKEN");
    }
  }
  ~ScopedTokenEnv() {
    if (old_) {
      setenv("LF_JOB_TOKEN", old_->c_str(), 1);
    } else {
      unsetenv("LF_JOB_TOKEN");
    }
  }

 private:
  std::optional<std::string> old_;
};

// A one-subset dataset, the token file and (once) a CA, a server certificate for
// localhost/127.0.0.1, one for another name, and an unrelated second CA.
class ControlPlaneSecurity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/lf_security_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = new fs::path(tmpl);
    fs::create_directories(*root_ / "train/2_photo");
    for (const char* stem : {"astronaut", "chelsea"}) {
      fs::copy_file(std::string(kPhotos) + "/" + stem + ".png",
                    *root_ / "train/2_photo" / (std::string(stem) + ".png"));
      std::ofstream(*root_ / "train/2_photo" / (std::string(stem) + ".txt")) << "a photo\n";
    }
    {
      std::ofstream f(*root_ / "model.safetensors", std::ios::binary);
      const char header_len[8] = {8, 0, 0, 0, 0, 0, 0, 0};
      f.write(header_len, 8);
      f << "{}      ";
    }
    std::ofstream(*root_ / "vocab.txt.gz") << "placeholder";
    // Surrounding whitespace is trimmed (files made with echo end in a newline).
    std::ofstream(*root_ / "token") << "  " << kToken << "\n";
    make_certificates();
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*root_, ec);
    delete root_;
    root_ = nullptr;
  }

  static void make_certificates() {
    const std::string d = root_->string();
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string ca_ext =
        " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign";
    std::vector<std::string> cmds = {
        "openssl req -x509" + ec + " -keyout " + d + "/ca.key -out " + d +
            "/ca.pem -days 2 -subj /CN=lorafleet-test-ca" + ca_ext,
        "openssl req -x509" + ec + " -keyout " + d + "/other_ca.key -out " + d +
            "/other_ca.pem -days 2 -subj /CN=another-ca" + ca_ext,
    };
    for (const auto& [name, san] :
         {std::pair<std::string, std::string>{"server", "DNS:localhost,IP:127.0.0.1"},
          {"named", "DNS:coordinator.lorafleet.test"}}) {
      const std::string cn = name == "server" ? "localhost" : "coordinator.lorafleet.test";
      std::ofstream(*root_ / (name + ".ext"))
          << "subjectAltName=" << san << "\nextendedKeyUsage=serverAuth\n";
      cmds.push_back("openssl req" + ec + " -keyout " + d + "/" + name + ".key -out " + d + "/" +
                     name + ".csr -subj /CN=" + cn);
      cmds.push_back("openssl x509 -req -in " + d + "/" + name + ".csr -CA " + d +
                     "/ca.pem -CAkey " + d + "/ca.key -CAcreateserial -days 2 -out " + d + "/" +
                     name + ".pem -extfile " + d + "/" + name + ".ext");
    }
    for (const std::string& cmd : cmds) {
      const auto [rc, out] = run_command(cmd);
      ASSERT_EQ(rc, 0) << cmd << "\n" << out;
    }
  }

  // `coordinator_extra`: more lines of the coordinator section.
  static JobConfig config(const std::string& coordinator_extra,
                          const std::string& listen = "127.0.0.1:0") {
    const std::string r = root_->string();
    std::ostringstream y;
    y << "model:\n"
      << "  pretrained_model_name_or_path: " << r << "/model.safetensors\n"
      << "  tokenizer_vocab: " << r << "/vocab.txt.gz\n"
      << "dataset:\n"
      << "  train_data_dir: " << r << "/train\n"
      << "  resolution: 256\n"
      << "  caption_extension: .txt\n"
      << "training:\n"
      << "  max_train_steps: 4\n"
      << "output:\n"
      // One output_dir per config: its coordinator state belongs to that job alone.
      << "  output_dir: " << r << "/out" << ++configs_made_ << "\n"
      << "coordinator:\n"
      << "  listen_address: " << listen << "\n"
      << "  metrics_address: \"\"\n"
      << coordinator_extra;
    return parse_job_config(y.str(), "security.yaml");
  }
  inline static int configs_made_ = 0;
  // Retries for 1 s only: for clients that are expected never to connect.
  static RetryPolicy brief_retry() {
    RetryPolicy r;
    r.budget = std::chrono::seconds(1);
    return r;
  }
  static std::string token_line() {
    return "  job_token_file: " + (*root_ / "token").string() + "\n";
  }
  static std::string tls_lines(const std::string& name = "server") {
    return "  tls_cert_file: " + (*root_ / (name + ".pem")).string() +
           "\n  tls_key_file: " + (*root_ / (name + ".key")).string() + "\n";
  }
  static CoordinatorOptions options() {
    CoordinatorOptions o;
    o.service.registration_timeout = std::chrono::seconds(10);
    o.service.tick = std::chrono::milliseconds(50);
    return o;
  }
  static std::string pem(const std::string& name) { return read_text(*root_ / (name + ".pem")); }

  static fs::path* root_;
};
fs::path* ControlPlaneSecurity::root_ = nullptr;

std::unique_ptr<pb::Coordinator::Stub> stub(
    const std::string& address,
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials(),
    const std::string& server_name = "") {
  grpc::ChannelArguments args;
  if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  return pb::Coordinator::NewStub(grpc::CreateCustomChannel(address, creds, args));
}

std::shared_ptr<grpc::ChannelCredentials> tls_trusting(const std::string& root_pem) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = root_pem;
  return grpc::SslCredentials(o);
}

// GetDataset with `authorization` metadata (none when empty).
grpc::Status get_dataset(pb::Coordinator::Stub& s, const std::string& authorization,
                         pb::DatasetManifest* out = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  pb::DatasetManifest m;
  return s.GetDataset(&ctx, pb::GetDatasetRequest(), out ? out : &m);
}

// ---- token -------------------------------------------------------------------------------

TEST(JobToken, LoopbackAddresses) {
  for (const char* a :
       {"127.0.0.1:50051", "127.3.2.1:0", "[::1]:50051", "localhost:1", "LocalHost:1"}) {
    EXPECT_TRUE(is_loopback_listen_address(a)) << a;
  }
  for (const char* a : {"0.0.0.0:50051", "[::]:50051", "10.1.2.3:50051", "128.0.0.1:1",
                        "coordinator.svc:50051", "[::ffff:10.0.0.1]:1"}) {
    EXPECT_FALSE(is_loopback_listen_address(a)) << a;
  }
}

TEST_F(ControlPlaneSecurity, MissingOrWrongTokenIsUnauthenticatedAndNotLogged) {
  ScopedTokenEnv no_env;
  CoordinatorServer server(config(token_line()), options());
  server.start();
  EXPECT_EQ(server.security_summary(), "plaintext, job token required");
  auto s = stub(server.address());

  // Every RPC checks first: a tokenless Register does not register anything.
  {
    pb::RegisterRequest req;
    req.set_rank(0);
    req.set_world_size(1);
    pb::RegisterResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status st = s->Register(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(server.service().registered_count(), 0);
  }
  const std::vector<std::pair<const char*, std::function<grpc::Status(grpc::ClientContext*)>>>
      calls = {{"GetEpochPlan",
                [&](grpc::ClientContext* c) {
                  pb::EpochPlan r;
                  return s->GetEpochPlan(c, pb::GetEpochPlanRequest(), &r);
                }},
               {"ReportProgress",
                [&](grpc::ClientContext* c) {
                  pb::ProgressAck r;
                  return s->ReportProgress(c, pb::ProgressReport(), &r);
                }},
               {"CommitCheckpoint",
                [&](grpc::ClientContext* c) {
                  pb::CheckpointAck r;
                  return s->CommitCheckpoint(c, pb::CheckpointReport(), &r);
                }},
               {"Finish",
                [&](grpc::ClientContext* c) {
                  pb::FinishAck r;
                  return s->Finish(c, pb::FinishRequest(), &r);
                }},
               {"Rendezvous", [&](grpc::ClientContext* c) {
                  pb::RendezvousResponse r;
                  return s->Rendezvous(c, pb::RendezvousRequest(), &r);
                }}};
  for (const auto& [name, call] : calls) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    EXPECT_EQ(call(&ctx).error_code(), grpc::StatusCode::UNAUTHENTICATED) << name;
  }

  // No token: rejected, logged with the peer and the RPC, nothing of the token.
  testing::internal::CaptureStderr();
  grpc::Status st = get_dataset(*s, "");
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(st.error_message().find("missing or wrong job token"), std::string::npos)
      << st.error_message();
  EXPECT_NE(log.find("rejected GetDataset from ipv4:127.0.0.1:"), std::string::npos) << log;
  EXPECT_EQ(log.find(kToken), std::string::npos) << log;

  // A near miss (last character differs), another scheme, a prefix: all rejected, and neither
  // the real token nor the guess (or a long part of either) is logged.
  std::string near(kToken);
  near.back() = near.back() == 'd' ? 'e' : 'd';
  const std::string prefix = std::string(kToken).substr(0, 10);
  for (const std::string& auth :
       {"Bearer " + near, std::string("Basic ") + kToken, "Bearer " + prefix,
        "Bearer " + std::string(kToken) + "x", std::string("Bearer")}) {
    testing::internal::CaptureStderr();
    st = get_dataset(*s, auth);
    log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << auth;
    EXPECT_NE(log.find("rejected GetDataset"), std::string::npos) << log;
    EXPECT_EQ(log.find(prefix), std::string::npos) << log;
    EXPECT_EQ(st.error_message().find(prefix), std::string::npos) << st.error_message();
  }

  // The right token works (the scheme is case-insensitive) and is not logged either.
  testing::internal::CaptureStderr();
  pb::DatasetManifest manifest;
  st = get_dataset(*s, std::string("Bearer ") + kToken, &manifest);
  const grpc::Status st2 = get_dataset(*s, std::string("bearer ") + kToken);
  log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(st2.ok()) << st2.error_message();
  EXPECT_EQ(manifest.images_size(), 2);
  EXPECT_EQ(log.find(prefix), std::string::npos) << log;
}

TEST_F(ControlPlaneSecurity, ClientSendsTheTokenWithEveryRpc) {
  ScopedTokenEnv no_env;
  CoordinatorOptions o = options();
  o.world_size = 1;
  CoordinatorServer server(config(token_line()), o);
  server.start();
  {
    CoordinatorClient anonymous(server.address());
    try {
      anonymous.get_dataset();
      FAIL() << "GetDataset without a token succeeded";
    } catch (const CoordinatorError& e) {
      EXPECT_NE(std::string(e.what()).find("missing or wrong job token"), std::string::npos)
          << e.what();
    }
  }
  // The worker's loader trims the file like the coordinator does.
  const ClientSecurity security = load_client_security((*root_ / "token").string(), "", "");
  EXPECT_EQ(security.job_token, kToken);
  testing::internal::CaptureStderr();
  {
    CoordinatorClient client(server.address(), security);
    WorkerIdentity me;
    me.hostname = "testhost";
    const JobAssignment job = client.register_worker(me, 10);
    EXPECT_EQ(job.world_size, 1);
    EXPECT_EQ(job.max_train_steps, 4);
    // The YAML sent to workers names the token file, never the token.
    EXPECT_NE(job.job_config_yaml.find("job_token_file"), std::string::npos);
    EXPECT_EQ(job.job_config_yaml.find(kToken), std::string::npos);
    EXPECT_EQ(client.get_dataset().images.size(), 2u);
    EXPECT_FALSE(client.get_epoch_plan(0).batches.empty());
    ProgressUpdate p;
    p.global_step = 4;
    client.report_progress_async(p);
    EXPECT_EQ(client.commit_checkpoint(0, 4, "/tmp/ckpt", std::chrono::seconds(10)),
              CoordinatorClient::CommitAck::kCommitted);
    FinishReport done;
    done.global_step = 4;
    client.finish(done);
  }
  // Finish went through: the job is done with exit code 0.
  const std::optional<int> code = server.wait_for(std::chrono::seconds(10));
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(server.service().last_committed_step(), 4);
  EXPECT_EQ(log.find("rejected"), std::string::npos) << log;
  EXPECT_EQ(log.find(kToken), std::string::npos) << log;
}

// A rendezvous RPC on `s` as rank `rank` of `generation` with `authorization` ("" for none).
grpc::Status rendezvous_call(pb::Coordinator::Stub& s, const std::string& authorization, int rank,
                             std::uint64_t generation, pb::RendezvousRequest::Op op,
                             const std::string& key, const std::string& value = "",
                             pb::RendezvousResponse* out = nullptr) {
  pb::RendezvousRequest req;
  req.set_rank(rank);
  req.set_generation(generation);
  req.set_op(op);
  req.add_keys(key);
  req.set_value(value);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  pb::RendezvousResponse r;
  return s.Rendezvous(&ctx, req, out ? out : &r);
}

// The env-mode rendezvous store lives in the coordinator: only the job's token holders reach it,
// only for the running generation and its ranks, within size limits, and a generation's end
// wakes and refuses its waiters (the ranks then exit for a restart).
TEST_F(ControlPlaneSecurity, RendezvousStoreNeedsTheTokenAndTheRunningGeneration) {
  ScopedTokenEnv no_env;
  CoordinatorOptions o = options();
  o.world_size = 2;
  CoordinatorServer server(config(token_line()), o);
  server.start();
  const ClientSecurity security = load_client_security((*root_ / "token").string(), "", "");
  CoordinatorClient rank0(server.address(), security);
  CoordinatorClient rank1(server.address(), security);
  auto register_as = [](CoordinatorClient& c, int rank) {
    WorkerIdentity me;
    me.rank = rank;
    me.world_size = 2;
    me.hostname = "testhost";
    return c.register_worker(me, 10);
  };
  auto second = std::async(std::launch::async, register_as, std::ref(rank1), 1);
  const std::uint64_t g = register_as(rank0, 0).generation;
  ASSERT_EQ(second.get().generation, g);
  CoordinatorRendezvous store0(rank0, 0, std::chrono::seconds(5));
  CoordinatorRendezvous store1(rank1, 1, std::chrono::seconds(5));

  // A rank's value reaches the other; a get waits for a value set later.
  store0.set("rank0/address", std::string("10.0.0.1\0:4242", 14));
  EXPECT_EQ(store1.get("rank0/address", std::chrono::seconds(5)),
            std::string("10.0.0.1\0:4242", 14));
  auto late =
      std::async(std::launch::async, [&] { return store1.get("late", std::chrono::seconds(20)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  store0.set("late", "here");
  EXPECT_EQ(late.get(), "here");
  EXPECT_EQ(store0.add("counter", 2), 2);
  EXPECT_EQ(store1.add("counter", 3), 5);

  // Without the token, or with another one, nothing is read or written.
  auto s = stub(server.address());
  const std::string bearer = std::string("Bearer ") + kToken;
  for (const std::string& auth : {std::string(), std::string("Bearer not-the-token")}) {
    pb::RendezvousResponse r;
    EXPECT_EQ(rendezvous_call(*s, auth, 0, g, pb::RendezvousRequest::GET, "rank0/address", "", &r)
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_FALSE(r.found());
    EXPECT_EQ(rendezvous_call(*s, auth, 0, g, pb::RendezvousRequest::SET, "rank0/address", "evil")
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(store1.get("rank0/address", std::chrono::seconds(1)),
            std::string("10.0.0.1\0:4242", 14));

  // With the token: only the running generation, only its ranks, within the limits.
  EXPECT_EQ(rendezvous_call(*s, bearer, 0, 0, pb::RendezvousRequest::GET, "k").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(rendezvous_call(*s, bearer, 0, g + 1, pb::RendezvousRequest::GET, "k").error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(rendezvous_call(*s, bearer, 2, g, pb::RendezvousRequest::GET, "k").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(rendezvous_call(*s, bearer, 0, g, pb::RendezvousRequest::SET, "big",
                            std::string(KeyValueStore::kMaxValueBytes + 1, 'x'))
                .error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  try {
    store0.set(std::string(KeyValueStore::kMaxKeyBytes + 1, 'k'), "v");
    FAIL() << "an oversized key was stored";
  } catch (const CoordinatorError& e) {
    EXPECT_TRUE(e.permanent()) << e.what();
  }

  // The generation ends (rank 1 fails): a waiting get returns at once, refused as superseded,
  // and the old generation's store is gone for good.
  auto waiting = std::async(std::launch::async, [&] {
    try {
      store0.get("never", std::chrono::seconds(60));
      return std::string("returned");
    } catch (const GroupSupersededError& e) {
      return std::string("superseded");
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  FinishReport failed;
  failed.rank = 1;
  failed.ok = false;
  failed.error = "test failure";
  rank1.finish(failed);
  EXPECT_EQ(waiting.get(), "superseded");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(
      rendezvous_call(*s, bearer, 0, g, pb::RendezvousRequest::GET, "rank0/address").error_code(),
      grpc::StatusCode::ABORTED);
}

TEST_F(ControlPlaneSecurity, TokenFromTheEnvironmentIsEnforcedOnLoopback) {
  ScopedTokenEnv env("  env-token-123 \n");
  CoordinatorServer server(config(""), options());
  server.start();
  auto s = stub(server.address());
  EXPECT_EQ(get_dataset(*s, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(get_dataset(*s, "Bearer env-token-12").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(get_dataset(*s, "Bearer env-token-123").ok());
  // The worker side reads the same variable.
  EXPECT_EQ(load_client_security("", "", "").job_token, "env-token-123");
}

TEST_F(ControlPlaneSecurity, LoopbackWithoutTokenAcceptsEveryCall) {
  ScopedTokenEnv no_env;
  CoordinatorServer server(config(""), options());
  server.start();
  EXPECT_EQ(server.security_summary(), "plaintext, no job token (loopback only)");
  EXPECT_TRUE(get_dataset(*stub(server.address()), "").ok());
}

TEST_F(ControlPlaneSecurity, ClusterModeWithoutTokenRefusesToStart) {
  ScopedTokenEnv no_env;
  try {
    CoordinatorServer server(config("", "0.0.0.0:0"), options());
    FAIL() << "a coordinator on 0.0.0.0:0 without a token was created";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("0.0.0.0:0"), std::string::npos) << what;
    EXPECT_NE(what.find("LF_JOB_TOKEN"), std::string::npos) << what;
    EXPECT_NE(what.find("coordinator.job_token_file"), std::string::npos) << what;
  }
  // With a token it serves on every interface.
  CoordinatorServer server(config(token_line(), "0.0.0.0:0"), options());
  server.start();
  EXPECT_GT(server.port(), 0);
  EXPECT_EQ(get_dataset(*stub("127.0.0.1:" + std::to_string(server.port())), "").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(ControlPlaneSecurity, BadTokenFilesAreNamed) {
  ScopedTokenEnv no_env;
  const fs::path empty = *root_ / "empty_token";
  std::ofstream(empty) << " \n\t\n";
  const fs::path missing = *root_ / "no_such_token";
  for (const fs::path& p : {empty, missing}) {
    try {
      CoordinatorServer server(config("  job_token_file: " + p.string() + "\n"), options());
      FAIL() << "accepted token file " << p;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(p.string() + " (coordinator.job_token_file)"),
                std::string::npos)
          << e.what();
    }
  }
  // --job-token-file overrides the key and is named in its errors.
  CoordinatorOptions o = options();
  o.job_token_file = missing.string();
  try {
    CoordinatorServer server(config(token_line()), o);
    FAIL() << "accepted token file " << missing;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string() + " (--job-token-file)"),
              std::string::npos)
        << e.what();
  }
  // A token with an inner newline could not travel as a header: refused without echoing it.
  const fs::path two_lines = *root_ / "two_line_token";
  std::ofstream(two_lines) << "first-line-secret\nsecond-line-secret\n";
  try {
    load_client_security(two_lines.string(), "", "");
    FAIL() << "accepted a two-line token";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(two_lines.string() + " (--job-token-file)"), std::string::npos) << what;
    EXPECT_EQ(what.find("line-secret"), std::string::npos) << what;
  }
  try {
    load_client_security("", (*root_ / "no_such_ca.pem").string(), "");
    FAIL() << "accepted a missing CA file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_ca.pem (--tls-ca-file)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(load_client_security("", "", "coordinator.lorafleet.test"), std::runtime_error);
}

TEST_F(ControlPlaneSecurity, CoordinatorBinaryRefusesClusterModeWithoutToken) {
  const std::string bin = LF_BINARY_DIR "/coordinator/lorafleet-coordinator";
  if (!fs::exists(bin)) GTEST_SKIP() << bin << " not built";
  const fs::path cfg = *root_ / "cluster.yaml";
  std::ofstream(cfg) << config("", "0.0.0.0:0").yaml_text;
  const auto [rc, out] = run_command("env -u LF_JOB_TOKEN " + bin + " --config " + cfg.string());
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(out.rfind("lorafleet-coordinator: error: refusing to serve the control plane on "
                      "0.0.0.0:0",
                      0),
            0u)
      << out;
  EXPECT_NE(out.find("LF_JOB_TOKEN"), std::string::npos) << out;
}

// ---- TLS ---------------------------------------------------------------------------------

TEST_F(ControlPlaneSecurity, TlsWithTheRightCaOnly) {
  ScopedTokenEnv no_env;
  CoordinatorServer server(config(token_line() + tls_lines()), options());
  server.start();
  EXPECT_EQ(server.security_summary(), "TLS, job token required");
  const std::string bearer = std::string("Bearer ") + kToken;
  const std::string local = "localhost:" + std::to_string(server.port());

  // The CA that signed it: by IP SAN and by DNS name, through a raw stub and the worker client.
  EXPECT_TRUE(get_dataset(*stub(server.address(), tls_trusting(pem("ca"))), bearer).ok());
  EXPECT_TRUE(get_dataset(*stub(local, tls_trusting(pem("ca"))), bearer).ok());
  const ClientSecurity security =
      load_client_security((*root_ / "token").string(), (*root_ / "ca.pem").string(), "");
  EXPECT_EQ(CoordinatorClient(server.address(), security).get_dataset().images.size(), 2u);
  // TLS does not replace the token.
  EXPECT_EQ(get_dataset(*stub(server.address(), tls_trusting(pem("ca"))), "").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // Another CA, the system roots, plaintext: no connection at all.
  EXPECT_EQ(
      get_dataset(*stub(server.address(), tls_trusting(pem("other_ca"))), bearer).error_code(),
      grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(get_dataset(*stub(local, grpc::SslCredentials(grpc::SslCredentialsOptions())), bearer)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(get_dataset(*stub(server.address()), bearer).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  ClientSecurity wrong_ca = security;
  wrong_ca.tls_root_pem = pem("other_ca");
  // A failed handshake looks like an unreachable coordinator, which workers retry for their
  // budget (10 minutes by default); here 1 s.
  EXPECT_THROW(CoordinatorClient(server.address(), wrong_ca, brief_retry()).get_dataset(),
               CoordinatorError);
}

TEST_F(ControlPlaneSecurity, TlsServerNameOverride) {
  ScopedTokenEnv no_env;
  // The certificate names coordinator.lorafleet.test only; workers dial 127.0.0.1.
  CoordinatorServer server(config(token_line() + tls_lines("named")), options());
  server.start();
  ClientSecurity security;
  security.job_token = kToken;
  security.tls_root_pem = pem("ca");
  EXPECT_THROW(CoordinatorClient(server.address(), security, brief_retry()).get_dataset(),
               CoordinatorError);
  security.tls_server_name = "coordinator.lorafleet.test";
  EXPECT_EQ(CoordinatorClient(server.address(), security).get_dataset().images.size(), 2u);
}

TEST_F(ControlPlaneSecurity, UnreadableTlsFilesAreNamed) {
  ScopedTokenEnv no_env;
  const std::string missing = (*root_ / "no_such.key").string();
  try {
    CoordinatorServer server(config("  tls_cert_file: " + (*root_ / "server.pem").string() +
                                    "\n  tls_key_file: " + missing + "\n"),
                             options());
    FAIL() << "accepted a missing key file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing + " (coordinator.tls_key_file)"),
              std::string::npos)
        << e.what();
  }
  // A key that does not match the certificate: the bind error names both files.
  CoordinatorServer server(config("  tls_cert_file: " + (*root_ / "server.pem").string() +
                                  "\n  tls_key_file: " + (*root_ / "named.key").string() + "\n"),
                           options());
  try {
    server.start();
    FAIL() << "served TLS with a key that does not match the certificate";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("named.key"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lf
