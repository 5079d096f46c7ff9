// OperatorControl (see header).
#include "coordinator/operator_control.h"

namespace lf {

namespace {
std::string by(const std::string& who) { return who.empty() ? "an operator" : who; }
}  // namespace

OperatorControl::Outcome OperatorControl::request_stop(const std::string& who) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return {false, "the job has already ended"};
  if (requests_.cancel) return {false, "a cancel is already under way (" + requests_.reason + ")"};
  if (requests_.stop) return {true, "a stop is already under way (" + requests_.reason + ")"};
  requests_.stop = true;
  requests_.reason = "stop asked by " + by(who);
  return {true,
          "the ranks stop after the next step they agree on, commit a checkpoint, write the "
          "LoRA and exit 0"};
}

OperatorControl::Outcome OperatorControl::request_cancel(const std::string& who,
                                                         Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return {false, "the job has already ended"};
  if (requests_.cancel) return {true, "a cancel is already under way (" + requests_.reason + ")"};
  requests_.cancel = true;
  requests_.stop = false;
  requests_.reason = "cancel asked by " + by(who);
  cancel_at_ = now;
  return {true, "the ranks exit at once; the last committed checkpoint stays the resume point"};
}

OperatorControl::Outcome OperatorControl::request_sample_now(const std::string& who) {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)who;
  if (!sample_prompts_) {
    return {false, "the job has no sample prompts (output.sample_prompts is not set)"};
  }
  if (ended_) return {false, "the job has already ended"};
  if (requests_.stop || requests_.cancel) {
    return {false, "the job is ending (" + requests_.reason + ")"};
  }
  ++requests_.sample_now;
  return {true, "sample images after the next step the ranks agree on (request " +
                    std::to_string(requests_.sample_now) + ")"};
}

void OperatorControl::job_ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  ended_ = true;
}

OperatorRequests OperatorControl::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

bool OperatorControl::cancel_overdue(Clock::time_point now, std::chrono::milliseconds wait) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_.cancel && now - cancel_at_ >= wait;
}

}  // namespace lf
