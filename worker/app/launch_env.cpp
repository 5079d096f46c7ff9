// Launch-mode detection (see header).
#include "worker/app/launch_env.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/cuda.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "common/config/job_config.h"
#include "common/util/host_port.h"

namespace lf {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

int parse_non_negative(const char* name, const char* value) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v < 0 || v > 1 << 20) {
    throw std::invalid_argument(std::string("environment variable ") + name +
                                ": expected an integer >= 0, got '" + value + "'");
  }
  return static_cast<int>(v);
}

}  // namespace

LaunchInfo resolve_launch(const std::string& flag) {
  LaunchInfo info;
  if (flag == "auto") {
    info.mode =
        (env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK")) ? LaunchMode::kMpirun : LaunchMode::kEnv;
  } else if (flag == "mpirun") {
    info.mode = LaunchMode::kMpirun;
  } else if (flag == "env") {
    info.mode = LaunchMode::kEnv;
  } else {
    throw std::invalid_argument("--launcher: expected auto, mpirun or env, got '" + flag + "'");
  }
  if (info.mode == LaunchMode::kMpirun) {
    if (const char* v = env("OMPI_COMM_WORLD_LOCAL_RANK")) {
      info.local_rank = parse_non_negative("OMPI_COMM_WORLD_LOCAL_RANK", v);
      return info;
    }
  }
  for (const char* name : {"LF_LOCAL_RANK", "LOCAL_RANK"}) {
    if (const char* v = env(name)) {
      info.local_rank = parse_non_negative(name, v);
      break;
    }
  }
  if (info.mode == LaunchMode::kMpirun) return info;
  for (const char* name : {"LF_RANK", "JOB_COMPLETION_INDEX", "RANK"}) {
    if (const char* v = env(name)) {
      info.rank = parse_non_negative(name, v);
      info.rank_source = name;
      break;
    }
  }
  if (info.rank_source.empty() && flag == "auto") {
    // Neither MPI nor a rank variable: one process on its own, as a singleton MPI run was.
    info.world_size = 1;
    info.rank_source = "none (a single process: rank 0 of 1)";
    return info;
  }
  if (info.rank_source.empty()) {
    throw std::invalid_argument(
        "--launcher env: no rank in the environment: set LF_RANK (or run as a Kubernetes "
        "Indexed Job, which sets JOB_COMPLETION_INDEX), or launch with mpirun");
  }
  for (const char* name : {"LF_WORLD_SIZE", "WORLD_SIZE"}) {
    if (const char* v = env(name)) {
      info.world_size = parse_non_negative(name, v);
      break;
    }
  }
  return info;
}

int cuda_device_index(int local_rank) {
  if (!torch::cuda::is_available()) return -1;
  const int count = static_cast<int>(torch::cuda::device_count());
  return count > 0 ? std::max(0, local_rank) % count : -1;
}

at::Device choose_training_device(const std::string& config_name, const std::string& worker_device,
                                  int local_rank) {
  const int index = worker_device == "cpu" ? -1 : cuda_device_index(local_rank);
  if (worker_device == "cuda" && index < 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw ConfigError(config_name + ": key 'worker.device': cuda, but no CUDA device is visible" +
                      (visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : "") +
                      "; use auto or cpu");
  }
  if (index < 0) return at::Device(at::kCPU);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::string local_address_towards(const std::string& host_port) {
  const HostPort hp = split_host_port(host_port);
  if (hp.port.empty()) return "";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(hp.host.c_str(), hp.port.c_str(), &hints, &res) != 0) {
    return "";
  }
  std::string out;
  for (addrinfo* a = res; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      sockaddr_storage local{};
      socklen_t len = sizeof(local);
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        char buf[INET6_ADDRSTRLEN] = {0};
        const void* addr =
            local.ss_family == AF_INET
                ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
        if (inet_ntop(local.ss_family, addr, buf, sizeof(buf)) != nullptr) out = buf;
      }
    }
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

std::string gloo_local_address(const std::string& advertise, const std::string& coordinator,
                               const std::string& hostname) {
  if (!advertise.empty()) return advertise;
  const std::string routed = local_address_towards(coordinator);
  return routed.empty() ? hostname : routed;
}

}  // namespace lf
