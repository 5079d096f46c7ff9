// CoordinatorServer and run_coordinator: wiring of job, service, gRPC server and /metrics, plus
// the process lifecycle (signals, final metrics snapshot, linger). Bound ports are read back
// from gRPC and the exposer so "port 0" (tests, shared hosts) works.
#include "coordinator/server.h"

#include <yaml-cpp/yaml.h>

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/io/atomic_file.h"
#include "common/metrics/exposer.h"
#include "common/security/secret.h"
#include "common/util/log.h"
#include "coordinator/auth.h"

namespace lf {

static std::string with_port(const std::string& address, int port) {
  const std::size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  return host + ":" + std::to_string(port);
}

// The job config without what may change between coordinator runs of one job: where it
// listens, how the group is launched and supervised (world size included: a resumed job may run
// on another number of ranks), how long it trains and how often it saves. What is left (model,
// data, network, optimizer, seed, output_dir) identifies the job whose state the file holds.
static std::string training_identity_text(const std::string& yaml_text) {
  YAML::Node root = YAML::Load(yaml_text);
  if (!root.IsMap()) return yaml_text;
  for (const char* section : {"coordinator", "cluster", "worker"}) root.remove(section);
  if (root["training"] && root["training"].IsMap()) {
    for (const char* key : {"max_train_steps", "max_train_epochs", "save_every_n_steps"}) {
      root["training"].remove(key);
    }
  }
  if (root["output"] && root["output"].IsMap()) root["output"].remove("keep_last_n_checkpoints");
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

CoordinatorServer::CoordinatorServer(const JobConfig& config, const CoordinatorOptions& options)
    : config_(config) {
  listen_address_ = options.listen_address.value_or(config_.coordinator.listen_address);
  metrics_address_ = options.metrics_address.value_or(config_.coordinator.metrics_address);
  if (listen_address_.empty()) {
    throw std::invalid_argument(
        "coordinator.listen_address: expected host:port (e.g. 127.0.0.1:50051), got \"\"");
  }
  if (options.world_size < 0) {
    throw std::invalid_argument("--world-size: expected an integer >= 1, got " +
                                std::to_string(options.world_size));
  }
  ServiceOptions service_options = options.service;
  // --world-size wins over the config's cluster.world_size; 0 in both: from the first Register.
  service_options.world_size = options.world_size > 0 ? options.world_size : config.cluster.world_size;
  // Before the dataset scan: a coordinator that may not serve should say so at once.
  if (service_options.job_token.empty()) {
    service_options.job_token = resolve_job_token(
        listen_address_, options.job_token_file.value_or(config_.coordinator.job_token_file),
        options.job_token_file ? "--job-token-file" : "coordinator.job_token_file");
  }
  token_required_ = !service_options.job_token.empty();
  if (!config_.coordinator.tls_cert_file.empty()) {
    tls_cert_pem_ = read_pem_file(config_.coordinator.tls_cert_file, "coordinator.tls_cert_file");
    tls_key_pem_ = read_pem_file(config_.coordinator.tls_key_file, "coordinator.tls_key_file");
  }
  if (!options.service_timeouts_overridden) {
    service_options.worker_timeout = std::chrono::seconds(config_.coordinator.worker_timeout_seconds);
    service_options.rendezvous_timeout =
        std::chrono::seconds(config_.cluster.rendezvous_timeout_seconds);
    service_options.max_restarts = config_.cluster.max_restarts;
  }
  job_ = std::make_unique<CoordinatorJob>(config_);
  metrics_ = std::make_unique<CoordinatorMetrics>();
  const std::string state_path = options.state_path.value_or(
      (std::filesystem::path(config_.output.output_dir) / "coordinator" / "state.sqlite").string());
  if (!state_path.empty()) {
    store_ = std::make_unique<StateStore>(
        state_path, StateStore::job_id_for(training_identity_text(config_.yaml_text),
                                           config_.training.seed));
  }
  control_ = std::make_unique<OperatorControl>(!job_->config().sample_prompts_text.empty());
  service_ = std::make_unique<CoordinatorService>(*job_, *metrics_, service_options, store_.get(),
                                                  control_.get());
  endpoint_ = std::make_unique<CoordinatorEndpoint>(*service_);
  control_service_ =
      std::make_unique<ControlService>(service_options.job_token, *control_, *service_);
  status_http_ = std::make_unique<StatusHttp>(
      service_options.job_token, *service_, *control_service_,
      (std::filesystem::path(config_.output.output_dir) / "sample").string());
}

CoordinatorServer::~CoordinatorServer() { shutdown(); }

void CoordinatorServer::start() {
  grpc::ServerBuilder builder;
  int selected_port = 0;
  // Without this, gRPC sets SO_REUSEPORT and a second coordinator would share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!tls_cert_pem_.empty()) {
    grpc::SslServerCredentialsOptions tls;  // no client certificates: the job token says who
    tls.pem_key_cert_pairs.push_back({tls_key_pem_, tls_cert_pem_});
    credentials = grpc::SslServerCredentials(tls);
  }
  builder.AddListeningPort(listen_address_, credentials, &selected_port);
  builder.RegisterService(endpoint_.get());
  builder.RegisterService(control_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || selected_port == 0) {
    server_.reset();
    throw std::runtime_error(
        "cannot listen on " + listen_address_ +
        " (coordinator.listen_address / --listen): expected a free, bindable host:port" +
        (tls_cert_pem_.empty()
             ? std::string()
             : ", and a matching PEM certificate and key in " + config_.coordinator.tls_cert_file +
                   " and " + config_.coordinator.tls_key_file));
  }
  port_ = selected_port;
  if (!metrics_address_.empty()) {
    // Without a job token the status page's only guard is a loopback Host header, which a
    // client other than a browser sets as it likes: on another address it serves /metrics only.
    std::vector<metrics::HttpRoute> routes;
    if (token_required_ || is_loopback_listen_address(metrics_address_)) {
      routes = status_http_->routes();
    } else {
      LF_WARN("coordinator.metrics_address " << metrics_address_
                                             << " is not loopback and no job token is set: it "
                                                "serves /metrics only, not the status page and "
                                                "its stop, cancel and sample-now (set "
                                                "coordinator.job_token_file to serve them)");
    }
    try {
      exposer_ = std::make_unique<metrics::Exposer>(metrics_address_, 2, std::move(routes));
    } catch (const std::exception& e) {
      server_->Shutdown();
      server_.reset();
      throw std::runtime_error(std::string("coordinator.metrics_address / --metrics: ") +
                               e.what());
    }
    exposer_->RegisterCollectable(metrics_->registry());
  }
}

int CoordinatorServer::metrics_port() const { return exposer_ ? exposer_->port() : 0; }

std::string CoordinatorServer::address() const { return with_port(listen_address_, port_); }

std::string CoordinatorServer::security_summary() const {
  return std::string(tls_cert_pem_.empty() ? "plaintext" : "TLS") +
         (token_required_ ? ", job token required" : ", no job token (loopback only)");
}

std::string CoordinatorServer::write_metrics_snapshot() const {
  const std::filesystem::path dir = std::filesystem::path(config_.output.output_dir) / "metrics";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw std::runtime_error("cannot create " + dir.string() + " (output.output_dir): " +
                             ec.message());
  }
  const std::string path = (dir / "coordinator.prom").string();
  write_file_atomic(path, metrics_->serialize());
  return path;
}

void CoordinatorServer::shutdown(std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  service_->shutdown();  // wakes blocked Register calls first, so Shutdown need not wait on them
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + grace);
    server_->Wait();
    server_.reset();
  }
  exposer_.reset();
}

// ---- run_coordinator ---------------------------------------------------------------------

static std::atomic<int> g_signal{0};
static std::atomic<int> g_interrupts{0};  // SIGINTs so far: the first asks for a stop

extern "C" void lf_coordinator_on_signal(int sig) {
  if (sig == SIGINT) g_interrupts.fetch_add(1);
  g_signal.store(sig);
}

int run_coordinator(const JobConfig& config, const CoordinatorOptions& options) {
  CoordinatorServer server(config, options);
  server.start();
  LF_INFO("serving lorafleet.v1.Coordinator on " << server.address() << " (job config "
                                                 << config.source_name << "; "
                                                 << server.security_summary() << ")");
  if (!is_loopback_listen_address(server.address()) && config.coordinator.tls_cert_file.empty()) {
    LF_WARN("the control plane on " << server.address()
                                    << " is plaintext: the job token crosses the network "
                                       "unencrypted (set coordinator.tls_cert_file and "
                                       "tls_key_file on untrusted networks)");
  }
  if (server.metrics_port() > 0) {
    const std::string http =
        "http://" + with_port(options.metrics_address.value_or(config.coordinator.metrics_address),
                              server.metrics_port());
    LF_INFO("serving /metrics on "
            << http << "/metrics and the status page on " << http << "/"
            << (server.security_summary().find("token required") != std::string::npos
                    ? " (open /?token=<job token> once)"
                    : ""));
  } else {
    LF_INFO("/metrics disabled (coordinator.metrics_address is empty)");
  }

  g_signal.store(0);
  g_interrupts.store(0);
  auto old_int = std::signal(SIGINT, lf_coordinator_on_signal);
  auto old_term = std::signal(SIGTERM, lf_coordinator_on_signal);
  int exit_code = 1;
  bool stop_asked = false;
  bool cancel_asked = false;
  while (true) {
    if (std::optional<int> code = server.wait_for(std::chrono::milliseconds(200))) {
      exit_code = *code;
      break;
    }
    const int sig = g_signal.load();
    const int interrupts = g_interrupts.load();
    if (sig == SIGINT && interrupts == 1 && !stop_asked) {
      // Ctrl-C: as `lorafleet-ctl stop`. The workers of the same terminal got it too and vote
      // to stop themselves; remote ones learn it from their heartbeat.
      stop_asked = true;
      const OperatorControl::Outcome o = server.control().act("stop", "Ctrl-C on the coordinator");
      if (o.accepted)
        LF_WARN("press Ctrl-C again to end the job at once (as lorafleet-ctl cancel)");
      continue;
    }
    if (sig == SIGINT && interrupts == 2 && !cancel_asked) {
      // A second Ctrl-C: as `lorafleet-ctl cancel`: the ranks exit 4 at their next heartbeat
      // (not restarted), the last committed checkpoint stands, and the coordinator exits 4.
      cancel_asked = true;
      server.control().act("cancel", "a second Ctrl-C on the coordinator");
      continue;
    }
    if (sig != 0 && (sig != SIGINT || interrupts > 2)) {
      LF_WARN("received signal " << sig << ": stopping the job");
      server.service().shutdown();
      exit_code = 1;
      break;
    }
  }

  try {
    LF_INFO("final metrics written to " << server.write_metrics_snapshot());
  } catch (const std::exception& e) {
    LF_ERROR("cannot write the final metrics snapshot: " << e.what());
  }
  const int linger = options.linger_seconds.value_or(config.coordinator.linger_seconds);
  if (linger > 0 && g_signal.load() == 0) {
    LF_INFO("lingering " << linger << " s before shutdown");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(linger);
    while (std::chrono::steady_clock::now() < until && g_signal.load() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  server.shutdown();
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  LF_INFO("coordinator exiting with code " << exit_code);
  return exit_code;
}

}  // namespace lf
