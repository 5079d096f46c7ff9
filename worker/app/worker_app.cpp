// Worker entry point (see header). Rank and world size come from Open MPI (mpirun sets
// OMPI_COMM_WORLD_RANK/SIZE; MPI_Init reads them). An error on one rank aborts the whole MPI job
// so peers never hang in a collective.
#include "worker/app/worker_app.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common/config/job_config.h"
#include "common/util/log.h"
#include "worker/dist/mpi_communicator.h"
#include "worker/dist/nccl_communicator.h"
#include "worker/rpc/coordinator_client.h"
#include "worker/train/trainer.h"

namespace lf {

int run_worker(int argc, char** argv) {
  CLI::App app{"lorafleet worker: one rank of a LoRA training job (launch with mpirun)"};
  std::string coordinator = "127.0.0.1:50051";
  std::string resume;
  int verify_sync_every = 0;
  int connect_timeout = -1;
  bool no_progress_bar = false;
  std::int64_t stop_at_step = 0;
  int metrics_linger_seconds = 0;
  app.add_option("--coordinator", coordinator, "coordinator address host:port")
      ->envname("LF_COORDINATOR");
  app.add_option("--resume", resume,
                 "continue from a checkpoint directory, or the newest complete one in a folder");
  app.add_option("--verify-sync-every", verify_sync_every,
                 "every N steps, check that all ranks hold identical LoRA weights (0 = off)");
  app.add_option("--connect-timeout", connect_timeout,
                 "seconds to wait for the coordinator to answer (default 30)");
  app.add_option("--stop-at-step", stop_at_step,
                 "stop (with a checkpoint) once global_step reaches N; resume later with --resume");
  app.add_option("--metrics-linger-seconds", metrics_linger_seconds,
                 "keep serving /metrics this many seconds after training ends");
  app.add_flag("--no-progress-bar", no_progress_bar, "plain progress lines even on a terminal");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  MpiRuntime mpi(&argc, &argv);
  const int rank = mpi.rank();
  set_log_role("rank " + std::to_string(rank));
  try {
    CoordinatorClient client(coordinator);
    WorkerIdentity me;
    me.rank = rank;
    me.world_size = mpi.world_size();
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    me.hostname = host;
    me.pid = static_cast<int>(getpid());
    // The device this rank will train on unless the job config says worker.device: cpu.
    me.device = torch_cuda_available() ? "cuda:" + std::to_string(cuda_device_for_rank(rank)) : "cpu";
    const int timeout = connect_timeout >= 0 ? connect_timeout : 30;
    JobAssignment job;
    try {
      job = client.register_worker(me, timeout);
    } catch (const CoordinatorError& e) {
      std::fprintf(stderr, "lorafleet-worker: error: %s\n", e.what());
      MpiRuntime::abort(1);
    }
    if (job.rank != rank || job.world_size != mpi.world_size()) {
      throw std::runtime_error("coordinator assigned rank " + std::to_string(job.rank) + "/" +
                               std::to_string(job.world_size) + " but mpirun started rank " +
                               std::to_string(rank) + "/" + std::to_string(mpi.world_size()));
    }
    // The dataset TOML comes with the assignment: its file need not exist on this host.
    const JobConfig config = parse_job_config(
        job.job_config_yaml, job.job_config_name, job.base_dir,
        job.dataset_config_toml.empty() ? nullptr : &job.dataset_config_toml);

    std::unique_ptr<Communicator> comm;
    if (config.worker.device != "cpu" && nccl_compiled_in() && torch_cuda_available()) {
      comm = std::make_unique<NcclCommunicator>(cuda_device_for_rank(rank));
    } else {
      comm = std::make_unique<MpiCommunicator>();
    }
    TrainerOptions opts;
    opts.resume = resume;
    opts.verify_sync_every = verify_sync_every;
    opts.stop_at_step = stop_at_step;
    opts.metrics_linger_seconds = metrics_linger_seconds;
    opts.progress_tty = !no_progress_bar && isatty(fileno(stdout));
    if (config.worker.metrics_port_base > 0) {
      opts.metrics_bind = config.worker.metrics_host + ":" +
                          std::to_string(config.worker.metrics_port_base + rank);
    }
    if (rank == 0) {
      LF_INFO("job " << job.job_config_name << ": world_size " << job.world_size << ", "
                     << job.max_train_steps << " steps over " << job.num_epochs
                     << " epochs, seed " << job.shared_seed << ", collectives "
                     << comm->backend());
    }
    TrainResult r = run_training(config, job, *comm, client, opts);
    client.finish(rank, r.global_step, true, "");
    if (rank == 0) {
      const double sps = r.seconds > 0 ? r.steps_run / r.seconds : 0.0;
      std::printf("lorafleet: trained %lld steps in %.1f s (%.2f steps/s)\n",
                  static_cast<long long>(r.steps_run), r.seconds, sps);
      std::printf("lorafleet: LoRA        %s\n", r.lora_path.c_str());
      std::printf("lorafleet: checkpoint  %s\n", r.checkpoint_dir.c_str());
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lorafleet-worker: error: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    try {
      CoordinatorClient(coordinator).finish(rank, 0, false, e.what());
    } catch (...) {
    }
    // Peers may be inside a collective waiting for this rank: end the whole job.
    MpiRuntime::abort(1);
  }
}

}  // namespace lf
