// TimedCommunicator (see header): one watchdog thread per process, armed around each collective.
#include "worker/dist/timed_communicator.h"

#include <unistd.h>

#include <cstdio>

#include "common/util/log.h"

namespace lf {

class TimedCommunicator::Armed {
 public:
  Armed(TimedCommunicator& c, const char* what) : c_(c) {
    std::lock_guard<std::mutex> lock(c_.mutex_);
    c_.current_ = what;
    c_.deadline_ = std::chrono::steady_clock::now() + c_.timeout_ + c_.slack_;
    c_.cv_.notify_all();
  }
  ~Armed() {
    std::lock_guard<std::mutex> lock(c_.mutex_);
    c_.current_ = nullptr;
  }

 private:
  TimedCommunicator& c_;
};

TimedCommunicator::TimedCommunicator(std::unique_ptr<Communicator> inner,
                                     std::chrono::milliseconds timeout,
                                     std::chrono::milliseconds slack)
    : inner_(std::move(inner)), timeout_(timeout), slack_(slack) {
  inner_->set_timeout(timeout_);
  watchdog_ = std::thread([this] { watch(); });
}

TimedCommunicator::~TimedCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  watchdog_.join();
}

void TimedCommunicator::set_timeout(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    timeout_ = timeout;
  }
  inner_->set_timeout(timeout);
}

void TimedCommunicator::allreduce_sum(at::Tensor& tensor) {
  Armed armed(*this, "allreduce");
  inner_->allreduce_sum(tensor);
}

void TimedCommunicator::broadcast(at::Tensor& tensor, int root) {
  Armed armed(*this, "broadcast");
  inner_->broadcast(tensor, root);
}

void TimedCommunicator::barrier() {
  Armed armed(*this, "barrier");
  inner_->barrier();
}

void TimedCommunicator::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (current_ == nullptr) {
      cv_.wait(lock);
      continue;
    }
    const auto deadline = deadline_;
    cv_.wait_until(lock, deadline);
    if (stop_ || current_ == nullptr || deadline_ != deadline) continue;
    if (std::chrono::steady_clock::now() < deadline) continue;
    // Still blocked in the same collective: a peer died or the network dropped.
    LF_ERROR(inner_->backend()
             << " " << current_ << " of rank " << inner_->rank() << " did not complete within "
             << (timeout_ + slack_).count() / 1000.0
             << " s (cluster.collective_timeout): a peer is gone or the network dropped; "
                "exiting with code "
             << kExitPeerLost << " so the group restarts from the last committed checkpoint");
    std::fflush(stderr);
    std::fflush(stdout);
    _exit(kExitPeerLost);
  }
}

}  // namespace lf
