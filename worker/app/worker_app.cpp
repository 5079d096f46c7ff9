// Worker entry point (see header). One process is one rank of one group generation: it registers,
// forms the collective group, trains, and exits; re-forming after a failure is a new process
// (lorafleet-launch, mpirun under a supervisor, or the Kubernetes Job controller restarts it).
// Exit codes say what happened, so supervisors and Kubernetes podFailurePolicy rules can act:
//   0   the job's last step is done
//   143 preempted (SIGTERM): a checkpoint was committed (or the grace ran out; the previous stands)
//   4   cancelled by an operator (lorafleet-ctl cancel): the last committed checkpoint stands
//   0   also after an operator's stop (lorafleet-ctl stop, Ctrl-C): checkpoint and LoRA written
//   75  a peer, the network or the coordinator was lost: restart the group
//   3   bad input (config, dataset, checkpoint): restarting cannot help
//   1   any other error
#include "worker/app/worker_app.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "common/config/job_config.h"
#include "common/data/dataset.h"
#include "common/util/exit_codes.h"
#include "common/util/log.h"
#include "worker/app/launch_env.h"
#include "worker/app/preemption.h"
#include "worker/app/training_monitor.h"
#include "worker/core/device/allocator_tuning.h"
#include "worker/dist/gloo_communicator.h"
#include "worker/dist/mpi_communicator.h"
#include "worker/dist/nccl_communicator.h"
#include "worker/dist/timed_communicator.h"
#include "worker/rpc/coordinator_client.h"
#include "worker/rpc/coordinator_rendezvous.h"
#include "worker/train/trainer.h"

namespace lf {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : fallback;
}

// LF_TEST_INJECT_INF_GRAD=RANK:STEP, the test hook of fp16 loss scaling (trainer.h). Throws
// std::invalid_argument naming the variable on a malformed value.
std::optional<NonFiniteInjection> nonfinite_injection_from_env() {
  const std::string v = env_or("LF_TEST_INJECT_INF_GRAD", "");
  if (v.empty()) return std::nullopt;
  NonFiniteInjection inject;
  char extra = 0;
  long long step = 0;
  if (std::sscanf(v.c_str(), "%d:%lld%c", &inject.rank, &step, &extra) != 2 || step < 1) {
    throw std::invalid_argument("LF_TEST_INJECT_INF_GRAD: expected RANK:STEP, got '" + v + "'");
  }
  inject.global_step = step;
  return inject;
}

// The exit status for an exception (see the table at the top).
// Rank 0's TensorBoard logs from the output section (kohya --logging_dir and friends).
TensorBoardOptions tensorboard_options(const JobConfig& config) {
  TensorBoardOptions tb;
  tb.logging_dir = config.output.logging_dir;
  tb.log_prefix = config.output.log_prefix;
  tb.log_tracker_name = config.output.log_tracker_name;
  tb.output_dir = config.output.output_dir;
  tb.optimizer_type = config.training.optimizer_type;
  if (config.output.log_config) {
    tb.config_text = config.yaml_text;
    if (!config.dataset_config_text.empty()) {
      tb.config_text += "\n# dataset.dataset_config:\n" + config.dataset_config_text;
    }
  }
  return tb;
}

int exit_code_for(const std::exception& e) {
  if (dynamic_cast<const CollectiveError*>(&e) != nullptr) return kExitPeerLost;
  if (const auto* c = dynamic_cast<const CoordinatorError*>(&e)) {
    return c->permanent() ? kExitBadInput : kExitPeerLost;
  }
  if (dynamic_cast<const ConfigError*>(&e) != nullptr) return kExitBadInput;
  if (dynamic_cast<const DatasetError*>(&e) != nullptr) return kExitBadInput;
  return 1;
}

}  // namespace

int run_worker(int argc, char** argv) {
  CLI::App app{"lorafleet worker: one rank of a LoRA training job (under mpirun, lorafleet-launch "
               "or a Kubernetes Job)"};
  std::string coordinator = "127.0.0.1:50051";
  std::string resume;
  std::string launcher = "auto";
  std::string advertise_address;
  int verify_sync_every = 0;
  int connect_timeout = -1;
  bool no_progress_bar = false;
  std::int64_t stop_at_step = 0;
  int metrics_linger_seconds = 0;
  std::string job_token_file;
  std::string tls_ca_file;
  std::string tls_server_name;
  std::string sample_log;
  app.add_option("--coordinator", coordinator, "coordinator address host:port")
      ->envname("LF_COORDINATOR");
  app.add_option("--job-token-file", job_token_file,
                 "file holding the job token sent with every RPC (else env LF_JOB_TOKEN)")
      ->envname("LF_JOB_TOKEN_FILE");
  app.add_option("--tls-ca-file", tls_ca_file,
                 "PEM CA that signed the coordinator's certificate: talk TLS, trusting only it")
      ->envname("LF_TLS_CA_FILE");
  app.add_option("--tls-server-name", tls_server_name,
                 "name in the coordinator's certificate when it differs from the dialled host")
      ->envname("LF_TLS_SERVER_NAME");
  app.add_option("--resume", resume,
                 "continue from a checkpoint directory, the newest complete one in a folder, or "
                 "'auto' (the newest under output_dir, else fresh); the coordinator resolves it "
                 "for the whole group, which may have another number of ranks")
      ->envname("LF_RESUME");
  app.add_option("--launcher", launcher,
                 "auto | mpirun | env: where the rank comes from (env: LF_RANK, "
                 "JOB_COMPLETION_INDEX or RANK; collectives over Gloo/NCCL via the coordinator)")
      ->envname("LF_LAUNCHER");
  app.add_option("--advertise-address", advertise_address,
                 "env mode: the address this rank's Gloo transport binds to and its peers reach "
                 "it at (default: this host's address on the route to the coordinator)")
      ->envname("LF_ADVERTISE_ADDRESS");
  app.add_option("--verify-sync-every", verify_sync_every,
                 "every N steps, check that all ranks hold identical LoRA weights (0 = off)");
  app.add_option("--connect-timeout", connect_timeout,
                 "seconds to wait for the coordinator to answer (default 30)");
  app.add_option("--stop-at-step", stop_at_step,
                 "stop (with a checkpoint) once global_step reaches N; resume later with --resume");
  app.add_option("--metrics-linger-seconds", metrics_linger_seconds,
                 "keep serving /metrics this many seconds after training ends");
  app.add_option("--sample-log", sample_log,
                 "append one JSON line per trained sample to PATH.rank<r>.jsonl")
      ->envname("LF_SAMPLE_LOG");
  app.add_flag("--no-progress-bar", no_progress_bar, "plain progress lines even on a terminal");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Before any tensor or thread: keep freed activations in the heap (allocator_tuning.h).
  tune_allocator_for_tensors();
  // Before anything slow: a SIGTERM during model loading must already be handled.
  Preemption::install(std::chrono::seconds(JobConfig{}.cluster.preempt_grace_seconds));

  LaunchInfo launch;
  try {
    launch = resolve_launch(launcher);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lorafleet-worker: error: %s\n", e.what());
    return kExitBadInput;
  }
  const bool under_mpi = launch.mode == LaunchMode::kMpirun;
  std::unique_ptr<MpiRuntime> mpi;
  if (under_mpi) {
    mpi = std::make_unique<MpiRuntime>(&argc, &argv);
    launch.rank = mpi->rank();
    launch.world_size = mpi->world_size();
  }
  const int rank = launch.rank;
  if (launch.local_rank < 0) launch.local_rank = rank;  // one rank per host unless told
  set_log_role("rank " + std::to_string(rank));
  // Under mpirun a failing rank ends the whole MPI job (MpiRuntime::abort), so no peer waits in
  // a collective.
  ClientSecurity security;
  // Outlives the try block: the failure report below goes out with this rank's generation.
  std::unique_ptr<CoordinatorClient> client_ptr;
  try {
    security = load_client_security(job_token_file, tls_ca_file, tls_server_name);
    client_ptr = std::make_unique<CoordinatorClient>(coordinator, security);
    CoordinatorClient& client = *client_ptr;
    WorkerIdentity me;
    me.rank = rank;
    me.world_size = launch.world_size;
    me.launcher = under_mpi ? "mpirun" : "env";
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    me.hostname = host;
    me.pid = static_cast<int>(getpid());
    me.restart_count = std::atoi(env_or("LF_RESTART_COUNT", "0").c_str());
    me.restart_cause = env_or("LF_RESTART_CAUSE", "");
    if (const std::string budget = env_or("LF_MAX_RESTARTS", ""); !budget.empty()) {
      me.max_restarts = std::max(0, std::atoi(budget.c_str()));
    }
    const int cuda_index = cuda_device_index(launch.local_rank);
    const bool cuda = cuda_index >= 0;
    // The coordinator resolves the path: make it independent of this process's directory.
    me.resume = resume.empty() || resume == "auto"
                    ? resume
                    : std::filesystem::absolute(resume).lexically_normal().string();
    // The device this rank will train on unless the job config says worker.device: cpu.
    me.device = cuda ? "cuda:" + std::to_string(cuda_index) : "cpu";
    // Env mode on GPUs: rank 0 makes the NCCL id before registering, so the coordinator can
    // relay it. Gloo ranks meet in the coordinator's rendezvous store after registering.
    if (!under_mpi && rank == 0 && cuda && nccl_compiled_in()) {
      me.nccl_unique_id = NcclCommunicator::new_unique_id();
    }
    const int timeout = connect_timeout >= 0 ? connect_timeout : 30;
    // An operator's cancel (lorafleet-ctl cancel) arrives on the heartbeat thread: report it and
    // leave at once; the last committed checkpoint stays the resume point.
    // Not MPI_Abort: this is not the thread that initialised MPI. Every rank hears the cancel
    // from its own heartbeat, and mpirun ends the rest when one rank exits non-zero.
    client.set_on_cancel([&client, rank](const std::string& reason) {
      LF_WARN("cancelled (" << reason << "): exiting with " << kExitCancelled
                            << "; the last committed checkpoint stays the resume point");
      FinishReport report;
      report.rank = rank;
      report.ok = false;
      report.error = "cancelled: " + reason;
      report.cancelled = true;
      client.set_retry_budget(std::chrono::seconds(2));
      client.finish(report);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(kExitCancelled);
    });
    const JobAssignment job = client.register_worker(me, timeout);
    if (job.rank != rank || (launch.world_size > 0 && job.world_size != launch.world_size)) {
      throw std::runtime_error("coordinator assigned rank " + std::to_string(job.rank) + "/" +
                               std::to_string(job.world_size) + " but the launcher started rank " +
                               std::to_string(rank) + "/" + std::to_string(launch.world_size));
    }
    // The dataset TOML comes with the assignment: its file need not exist on this host.
    JobConfig config =
        parse_job_config(job.job_config_yaml, job.job_config_name, job.base_dir,
                         job.dataset_config_toml.empty() ? nullptr : &job.dataset_config_toml);
    config.sample_prompts_text = job.sample_prompts_text;  // also read by the coordinator
    Preemption::set_grace(std::chrono::seconds(config.cluster.preempt_grace_seconds));

    // Setup collectives run under the rendezvous timeout; run_training narrows it per step.
    const auto setup_timeout = std::chrono::seconds(config.cluster.rendezvous_timeout_seconds);
    // The one place the training device is chosen (worker.device and the local rank).
    const at::Device device =
        choose_training_device(config.source_name, config.worker.device, launch.local_rank);
    const bool use_nccl = device.is_cuda() && nccl_compiled_in();
    std::unique_ptr<Communicator> backend;
    if (under_mpi) {
      if (use_nccl) {
        backend = std::make_unique<NcclCommunicator>(device.index(), setup_timeout);
      } else {
        backend = std::make_unique<MpiCommunicator>();
      }
    } else if (use_nccl && !job.nccl_unique_id.empty()) {
      backend = std::make_unique<NcclCommunicator>(device.index(), rank,
                                                   job.world_size, job.nccl_unique_id,
                                                   setup_timeout);
    } else {
      GlooOptions gloo;
      gloo.rank = rank;
      gloo.world_size = job.world_size;
      gloo.store = std::make_shared<CoordinatorRendezvous>(client, rank, setup_timeout);
      gloo.local_address = gloo_local_address(advertise_address, coordinator, me.hostname);
      gloo.timeout = setup_timeout;
      backend = std::make_unique<GlooCommunicator>(gloo);
    }
    TimedCommunicator comm(std::move(backend), setup_timeout);
    TrainingMonitorOptions monitor_options;
    monitor_options.rank = rank;
    monitor_options.progress_tty = !no_progress_bar && isatty(fileno(stdout));
    monitor_options.output_dir = config.output.output_dir;
    monitor_options.metrics_linger_seconds = metrics_linger_seconds;
    monitor_options.tensorboard = tensorboard_options(config);
    if (config.worker.metrics_port_base > 0) {
      monitor_options.metrics_bind = config.worker.metrics_host + ":" +
                                     std::to_string(config.worker.metrics_port_base + rank);
    }
    TrainingMonitor monitor(monitor_options);
    if (!monitor_options.metrics_bind.empty()) {
      LF_INFO("metrics at http://" << config.worker.metrics_host << ":" << monitor.metrics_port()
                                   << "/metrics");
    }
    TrainerOptions opts;
    opts.device = device;
    opts.observer = &monitor;
    opts.sample_log = sample_log;
    opts.verify_sync_every = verify_sync_every;
    opts.stop_at_step = stop_at_step;
    opts.inject_nonfinite = nonfinite_injection_from_env();
    opts.stop_requested = [] {  // polled once per step
      Preemption::set_checkpointable();
      return Preemption::requested();
    };
    opts.interrupt_requested = [] { return Preemption::interrupted(); };
    if (rank == 0) {
      LF_INFO("job " << job.job_config_name << ": world_size " << job.world_size << ", "
                     << job.max_train_steps << " steps over " << job.num_epochs
                     << " epochs, seed " << job.shared_seed << ", generation "
                     << job.generation << ", launcher " << me.launcher << ", collectives "
                     << comm.backend());
    }
    TrainResult r = run_training(config, job, comm, client, opts);
    if (r.preempted) {
      FinishReport report;
      report.rank = rank;
      report.global_step = r.global_step;
      report.preempted = true;
      client.finish(report);
      LF_WARN("preempted: checkpoint " << r.checkpoint_dir << " committed at global_step "
                                        << r.global_step << " within "
                                        << Preemption::seconds_since_request()
                                        << " s of the signal; exiting with " << kExitPreempted);
      std::fflush(stderr);
      std::fflush(stdout);
      // Peers exit at the same step; skip MPI_Finalize's barrier-like teardown.
      _exit(kExitPreempted);
    }
    if (r.stopped && rank == 0) {
      std::printf(
          "lorafleet: stopped at global_step %lld on an operator's request; --resume "
          "continues from the checkpoint\n",
          static_cast<long long>(r.global_step));
    }
    if (rank == 0) {
      const double sps = r.seconds > 0 ? r.steps_run / r.seconds : 0.0;
      std::printf("lorafleet: trained %lld steps in %.1f s (%.2f steps/s)\n",
                  static_cast<long long>(r.steps_run), r.seconds, sps);
      std::printf("lorafleet: LoRA        %s\n", r.lora_path.c_str());
      std::printf("lorafleet: checkpoint  %s\n", r.checkpoint_dir.c_str());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    FinishReport report;
    report.rank = rank;
    report.global_step = r.global_step;
    report.stopped = r.stopped;
    client.finish(report);
    // The Finish is the rank's last act: once every rank reported, the coordinator ends with the
    // job, so a rank that died after it (killed, or crashing in the teardown of LibTorch, Gloo
    // and the threads) would have its supervisor restart a group that can no longer register.
    // Everything the job wrote is on disk and flushed; MPI needs its MPI_Finalize (below).
    if (!under_mpi) _exit(0);
    return 0;
  } catch (const std::exception& e) {
    // 143 only for a committed preemption (above) or the grace watchdog: an error while a
    // SIGTERM is pending is still an error, and podFailurePolicy must count it.
    const int code = exit_code_for(e);
    std::fprintf(stderr, "lorafleet-worker: error: rank %d: %s (exit %d)\n", rank, e.what(), code);
    std::fflush(stderr);
    try {
      // Best effort and brief: the coordinator may be what was lost.
      if (!client_ptr) client_ptr = std::make_unique<CoordinatorClient>(coordinator, security);
      client_ptr->set_retry_budget(std::chrono::seconds(2));
      FinishReport report;
      report.rank = rank;
      report.ok = false;
      report.error = e.what();
      report.permanent = code == kExitBadInput;
      client_ptr->finish(report);
    } catch (...) {
    }
    if (under_mpi) MpiRuntime::abort(code);
    // Exit now: collective threads may be stuck on a dead peer, and destructors (the heartbeat
    // thread's in-flight report) would only delay the supervisor's restart.
    std::fflush(stdout);
    _exit(code);
  }
}

}  // namespace lf
