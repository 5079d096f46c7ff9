// How this worker process was launched, and so where its rank comes from:
//   mpirun  Open MPI (or another PMIx launcher) started every rank: rank and world size from MPI;
//           collectives over MPI (CPU) or NCCL bootstrapped over MPI (GPU).
//   env     no MPI (Kubernetes Indexed Job / JobSet, lorafleet-launch --nproc): rank from
//           LF_RANK, else JOB_COMPLETION_INDEX (Indexed Job), else RANK (torchrun's name); the
//           world size from LF_WORLD_SIZE / WORLD_SIZE, else the job's cluster.world_size sent by
//           the coordinator; collectives over Gloo (CPU) or NCCL (GPU) rendezvoused through the
//           coordinator.
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace lf {

enum class LaunchMode { kMpirun, kEnv };

struct LaunchInfo {
  LaunchMode mode = LaunchMode::kEnv;
  int rank = 0;             // env mode; mpirun mode fills it from MPI later
  int world_size = 0;       // env mode: 0 = take the job's cluster.world_size
  // The rank on this host (its GPU index on a multi-GPU host): OMPI_COMM_WORLD_LOCAL_RANK under
  // mpirun, else LF_LOCAL_RANK, else LOCAL_RANK (torchrun's name); -1 when none is set (the
  // caller uses the rank).
  int local_rank = -1;
  std::string rank_source;  // the variable the rank came from, for logs
};

// flag: "auto" (mpirun when OMPI_COMM_WORLD_SIZE or PMIX_RANK is set, else env; with no rank
// variable either, a single process: rank 0 of 1), "mpirun" or "env". Throws
// std::invalid_argument naming the flag or variable on a bad value, or when "env" finds no rank
// variable.
LaunchInfo resolve_launch(const std::string& flag);

// This process's CUDA device index: local_rank modulo the device count LibTorch sees, one GPU
// per local rank as torchrun's LOCAL_RANK convention; -1 when LibTorch sees no CUDA device.
int cuda_device_index(int local_rank);

// The device a rank trains on, chosen once: worker.device "cpu" -> CPU; "cuda" -> cuda:<index>
// (cuda_device_index), or a ConfigError naming the config file (config_name) and worker.device
// when no CUDA device is visible (the worker exits 3); "auto" -> cuda:<index> when one is
// visible, else the CPU.
at::Device choose_training_device(const std::string& config_name, const std::string& worker_device,
                                  int local_rank);

// The local IP address this host uses to reach `host_port` (a UDP connect, no packet sent).
// Returns "" when it cannot tell.
std::string local_address_towards(const std::string& host_port);

// The address an env-mode rank's Gloo transport binds to and advertises to its peers: `advertise`
// (--advertise-address / LF_ADVERTISE_ADDRESS) when given, else this host's address on the route
// to the coordinator, else `hostname`.
std::string gloo_local_address(const std::string& advertise, const std::string& coordinator,
                               const std::string& hostname);

}  // namespace lf
