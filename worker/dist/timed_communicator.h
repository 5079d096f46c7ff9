// A Communicator decorator that bounds every collective: if one has not returned within the
// timeout, the process logs which collective and for how long, and exits with kExitPeerLost (75).
// Exiting is the only safe way out of a blocked MPI or NCCL call (neither can be cancelled from
// another thread); the supervisor (lorafleet-launch, mpirun, the Kubernetes Job) then restarts the
// group from the last committed checkpoint. Backends with their own timeouts (Gloo, NCCL with
// ncclCommAbort) throw CollectiveError first; this is the backstop, armed `slack` later.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "common/util/exit_codes.h"
#include "worker/dist/communicator.h"

namespace lf {


class TimedCommunicator : public Communicator {
 public:
  // Wraps `inner` (owned). `timeout` bounds each collective; `slack` is added before the
  // watchdog fires, so a backend's own timeout error wins when it has one.
  TimedCommunicator(std::unique_ptr<Communicator> inner, std::chrono::milliseconds timeout,
                    std::chrono::milliseconds slack = std::chrono::seconds(5));
  ~TimedCommunicator() override;

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  void allreduce_sum(at::Tensor& tensor) override;
  void broadcast(at::Tensor& tensor, int root) override;
  void barrier() override;
  std::string backend() const override { return inner_->backend(); }
  void set_timeout(std::chrono::milliseconds timeout) override;

 private:
  class Armed;  // RAII: arms the watchdog for one collective
  void watch();

  std::unique_ptr<Communicator> inner_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds slack_;
  std::mutex mutex_;
  std::condition_variable cv_;
  const char* current_ = nullptr;  // the collective in flight, or nullptr
  std::chrono::steady_clock::time_point deadline_;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace lf
