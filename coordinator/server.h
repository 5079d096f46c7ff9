// The coordinator process: gRPC server + /metrics exposer around one CoordinatorJob, and
// run_coordinator(), the whole lifetime of lorafleet-coordinator (serve, wait for the workers,
// snapshot the metrics, linger, shut down). CoordinatorServer lets tests run it in-process.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/config/job_config.h"
#include "coordinator/control_service.h"
#include "coordinator/coordinator_endpoint.h"
#include "coordinator/operator_control.h"
#include "coordinator/service.h"
#include "coordinator/status_http.h"

namespace grpc {
class Server;
}

namespace lf {
namespace metrics {
class Exposer;
}

struct CoordinatorOptions {
  // Override coordinator.listen_address / coordinator.metrics_address ("" disables /metrics).
  std::optional<std::string> listen_address;
  std::optional<std::string> metrics_address;
  // > 0: fixed world_size; 0: taken from the first Register.
  int world_size = 0;
  // Overrides coordinator.linger_seconds.
  std::optional<int> linger_seconds;
  // Overrides coordinator.job_token_file (--job-token-file). Without either, the token comes
  // from LF_JOB_TOKEN; service.job_token, when set, is used as is (tests).
  std::optional<std::string> job_token_file;
  // Registration barrier, liveness and failure handling (see ServiceOptions).
  ServiceOptions service;
  // true: keep service.worker_timeout, rendezvous_timeout and max_restarts as given (tests)
  // instead of the config's coordinator.worker_timeout_seconds,
  // cluster.rendezvous_timeout_seconds and cluster.max_restarts.
  bool service_timeouts_overridden = false;
  // The durable job state; unset: <output_dir>/coordinator/state.sqlite, "": none (in memory).
  std::optional<std::string> state_path;
};

class CoordinatorServer {
 public:
  // Resolves the job token and reads the TLS files (std::runtime_error naming the file, or, in
  // cluster mode without a token, the listen address and both ways to give one), then scans the
  // dataset, opens the durable state (restoring a killed coordinator's job) and prepares the
  // service; binds nothing yet. Throws DatasetError, std::invalid_argument (options, schedule)
  // naming the file, key or value, std::runtime_error naming the state file when it holds
  // another unfinished job or cannot be used.
  CoordinatorServer(const JobConfig& config, const CoordinatorOptions& options);
  ~CoordinatorServer();  // shutdown()

  // Binds and starts serving gRPC on the listen address and /metrics, the status page (/) and
  // /api/v1/status (coordinator/status_http.h) on the metrics address (when non-empty). Throws
  // std::runtime_error "cannot listen on <addr> (<key>)..." when a bind fails. Not thread-safe;
  // call once.
  void start();
  // Bound ports (useful with port 0); 0 before start() or when /metrics is disabled.
  int port() const { return port_; }
  int metrics_port() const;
  // "host:port" with the bound port substituted.
  std::string address() const;
  // How the control plane is secured, for the start-up log: "TLS" or "plaintext", and whether
  // RPCs need the job token. Never contains the token.
  std::string security_summary() const;

  // Blocks until the job is done; returns the exit code (0: all ranks finished ok).
  int wait() { return service_->wait_until_done(); }
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    return service_->wait_until_done_for(timeout);
  }
  // Writes the current /metrics text to <output_dir>/metrics/coordinator.prom atomically and
  // returns the path. Throws std::runtime_error naming the path on failure.
  std::string write_metrics_snapshot() const;
  // Stops accepting RPCs (in-flight ones get up to `grace` to finish; blocked Register calls
  // return UNAVAILABLE) and stops /metrics. Idempotent.
  void shutdown(std::chrono::milliseconds grace = std::chrono::seconds(2));

  CoordinatorService& service() { return *service_; }
  // What gRPC serves lorafleet.v1.Coordinator through (GetDataset / GetEpochPlan as bytes).
  CoordinatorEndpoint& endpoint() { return *endpoint_; }
  ControlService& control() { return *control_service_; }
  CoordinatorMetrics& metrics() { return *metrics_; }
  const CoordinatorJob& job() const { return *job_; }

 private:
  JobConfig config_;
  std::string listen_address_;
  std::string metrics_address_;
  bool token_required_ = false;
  std::string tls_cert_pem_;  // both empty: plaintext
  std::string tls_key_pem_;
  std::unique_ptr<CoordinatorJob> job_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<OperatorControl> control_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<CoordinatorEndpoint> endpoint_;
  std::unique_ptr<ControlService> control_service_;
  std::unique_ptr<StatusHttp> status_http_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<metrics::Exposer> exposer_;
  int port_ = 0;
  bool stopped_ = false;
};

// The whole coordinator run: start, log both bound addresses, wait for the job, write the final
// metrics snapshot, linger, shut down. SIGTERM ends the job early with exit code 1 (the stored
// state stays resumable). The first SIGINT (Ctrl-C) asks the ranks to stop as
// `lorafleet-ctl stop` does (checkpoint, LoRA, exit 0); a second one cancels the job as
// `lorafleet-ctl cancel` (the ranks exit 4, the coordinator exits 4); a third ends the
// coordinator at once, as SIGTERM.
// Returns the process exit code. Throws (bind failure, dataset errors) for the caller to print.
int run_coordinator(const JobConfig& config, const CoordinatorOptions& options);

}  // namespace lf
