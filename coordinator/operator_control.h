// OperatorControl: what an operator asked of the running job through lorafleet.v1.JobControl
// (lorafleet-ctl stop | cancel | sample-now, the status page's forms, Ctrl-C on the
// coordinator). It only records the requests; CoordinatorService hands them to the workers with
// every heartbeat answer (ProgressAck), and the ranks agree on the step in their next gradient
// allreduce. Thread-safe; a plain class, so its rules are unit-tested without gRPC.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace lf {

// A snapshot of the requests.
struct OperatorRequests {
  bool stop = false;            // stop after an agreed step, checkpoint, LoRA, exit 0
  bool cancel = false;          // exit at once; the last committed checkpoint stands
  std::int64_t sample_now = 0;  // sample-now requests so far (monotonic)
  std::string reason;           // who asked for the stop / cancel, for logs and status
};

class OperatorControl {
 public:
  using Clock = std::chrono::steady_clock;

  // What a request did: accepted, or refused with the reason (the job has ended, a cancel is
  // already under way, the job has no sample prompts).
  struct Outcome {
    bool accepted = false;
    std::string detail;
  };

  // `sample_prompts`: whether the job has output.sample_prompts (sample-now needs them).
  explicit OperatorControl(bool sample_prompts) : sample_prompts_(sample_prompts) {}

  // Stop: refused once the job has ended or a cancel was asked; a second stop is accepted and
  // changes nothing. `who` names the requester in logs and the status.
  Outcome request_stop(const std::string& who);
  // Cancel: refused once the job has ended; it overrides a pending stop.
  Outcome request_cancel(const std::string& who, Clock::time_point now = Clock::now());
  // Sample-now: refused without sample prompts, once the job has ended, or after a stop or
  // cancel was asked. Each accepted request counts one sampling.
  Outcome request_sample_now(const std::string& who);
  // The job ended (any outcome): later requests are refused.
  void job_ended();

  OperatorRequests requests() const;
  // Whether a cancel was asked more than `wait` ago: the workers had time to exit on their
  // own, and the coordinator ends the job without them.
  bool cancel_overdue(Clock::time_point now, std::chrono::milliseconds wait) const;

 private:
  mutable std::mutex mutex_;
  bool sample_prompts_ = false;
  bool ended_ = false;
  OperatorRequests requests_;
  Clock::time_point cancel_at_{};
};

}  // namespace lf
