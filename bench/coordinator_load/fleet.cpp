// SimulatedFleet: the event loop (run_until), one send() for every RPC, and a handler per answer.
#include "bench/coordinator_load/fleet.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "common/data/epoch_plan.h"
#include "lorafleet/v1/control.pb.h"
#include "lorafleet/v1/coordinator.pb.h"
#include "proto/proto_convert.h"
#include "worker/rpc/coordinator_channel.h"

namespace lf::load {
namespace pb = lorafleet::v1;

struct SimulatedFleet::Call {
  int rank = -1;  // -1: the JobControl channel
  Rpc rpc = Rpc::kReport;
  std::int64_t arg = 0;  // epoch (GetEpochPlan) or step (CommitCheckpoint)
  bool heartbeat = false;
  grpc::ClientContext ctx;
  grpc::ByteBuffer response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> reader;
  Clock::time_point sent;
};

struct SimulatedFleet::Rank {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  std::uint64_t generation = 0;
  std::int64_t step = 0;    // steps completed
  bool registered = false;  // in this start's generation
  bool start_done = false;  // has its first plan, or a start RPC failed
  bool report_in_flight = false;
  bool report_pending = false;  // a newer report waits for the one in flight
  bool silent = false;          // the lease phase's victim
  bool told_stop = false;       // a ProgressAck said stop
  bool finished = false;        // Finish answered
  Clock::time_point told_stop_at{};
  Clock::time_point last_report_sent{};
  Clock::time_point last_sent{};  // any RPC
};

namespace {

struct RpcInfo {
  const char* name;
  const char* path;
  int deadline_seconds;  // as CoordinatorClient sets them
};

const RpcInfo& info(int rpc) {
  static const RpcInfo kInfo[] = {
      {"Register", "/lorafleet.v1.Coordinator/Register", 600},
      {"GetDataset", "/lorafleet.v1.Coordinator/GetDataset", 120},
      {"GetEpochPlan", "/lorafleet.v1.Coordinator/GetEpochPlan", 120},
      {"ReportProgress", "/lorafleet.v1.Coordinator/ReportProgress", 5},
      {"CommitCheckpoint", "/lorafleet.v1.Coordinator/CommitCheckpoint", 60},
      {"Finish", "/lorafleet.v1.Coordinator/Finish", 10},
      {"GetStatus", "/lorafleet.v1.JobControl/GetStatus", 10}};
  return kInfo[rpc];
}

std::string bytes_of(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  out.reserve(buffer.Length());
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

SimulatedFleet::SimulatedFleet(const std::string& address, const FleetOptions& options)
    : options_(options), ranks_(static_cast<std::size_t>(options.ranks)), rng_(options.seed) {
  if (options.ranks < 1 || options.steps < 0 || options.checkpoint_every < 1 ||
      options.step_seconds <= 0 || options.heartbeat_seconds <= 0) {
    throw std::invalid_argument(
        "load test: expected ranks >= 1, steps >= 0, checkpoint_every >= 1 and positive step "
        "and heartbeat seconds");
  }
  const ClientSecurity security{options.token, "", ""};
  for (Rank& r : ranks_) {
    r.channel = make_coordinator_channel(address, security, /*own_connection=*/true);
    r.stub = std::make_unique<grpc::GenericStub>(r.channel);
  }
  control_channel_ = make_coordinator_channel(address, security, /*own_connection=*/true);
  control_stub_ = std::make_unique<grpc::GenericStub>(control_channel_);
}

SimulatedFleet::~SimulatedFleet() {
  for (auto& [tag, call] : in_flight_) call->ctx.TryCancel();
  void* tag = nullptr;
  bool ok = false;
  while (!in_flight_.empty() && cq_.Next(&tag, &ok)) in_flight_.erase(static_cast<Call*>(tag));
  cq_.Shutdown();
  while (cq_.Next(&tag, &ok)) {
  }
}

void SimulatedFleet::send(int rank, Rpc rpc, std::int64_t arg, const std::string& request) {
  const RpcInfo& i = info(static_cast<int>(rpc));
  auto call = std::make_unique<Call>();
  call->rank = rank;
  call->rpc = rpc;
  call->arg = arg;
  add_job_token(&call->ctx, options_.token);
  call->ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(i.deadline_seconds));
  grpc::Slice slice(request);
  const grpc::ByteBuffer buffer(&slice, 1);
  grpc::GenericStub& stub = rank < 0 ? *control_stub_ : *ranks_[rank].stub;
  call->reader = stub.PrepareUnaryCall(&call->ctx, i.path, buffer, &cq_);
  call->sent = Clock::now();
  if (rank >= 0) ranks_[rank].last_sent = call->sent;
  call->reader->StartCall();
  Call* tag = call.get();
  call->reader->Finish(&call->response, &call->status, tag);
  in_flight_[tag] = std::move(call);
}

void SimulatedFleet::on_answer(Call& call) {
  const RpcInfo& i = info(static_cast<int>(call.rpc));
  stats_.add(i.name, 1e3 * seconds_between(call.sent, Clock::now()), call.status.ok());
  if (!call.status.ok() && failures_.size() < 10) {
    failures_.push_back(std::string(i.name) + " rank " + std::to_string(call.rank) + ": " +
                        describe_status(call.status));
  }
  const std::string bytes = call.status.ok() ? bytes_of(call.response) : std::string();
  Rank* r = call.rank >= 0 ? &ranks_[call.rank] : nullptr;
  switch (call.rpc) {
    case Rpc::kRegister: return on_register(call, bytes);
    case Rpc::kGetDataset:
      start_.manifest_bytes = std::max<std::int64_t>(start_.manifest_bytes, bytes.size());
      if (!call.status.ok()) {
        r->start_done = true;
        return;
      }
      return send_plan_request(call.rank, 0);
    case Rpc::kGetEpochPlan: return on_plan(call, bytes);
    case Rpc::kReport: return on_report(call, bytes);
    case Rpc::kCommit: {
      pb::CheckpointAck ack;
      if (call.status.ok() && ack.ParseFromString(bytes) && ack.committed()) {
        train_.committed_steps.insert(call.arg);
      }
      return;
    }
    case Rpc::kFinish: r->finished = true; return;
    case Rpc::kStatus: {
      status_in_flight_ = false;
      pb::JobStatus status;
      if (!call.status.ok() || !status.ParseFromString(bytes)) return;
      if (status_changed_at_ != Clock::time_point{}) return;  // the first change counts
      if (status_state_.empty()) {
        first_status_running_ = status.state() == "running";
        for (const pb::RankStatus& rs : status.ranks()) {
          if (first_status_lowest_step_ < 0 || rs.global_step() < first_status_lowest_step_) {
            first_status_lowest_step_ = rs.global_step();
          }
        }
      }
      status_state_ = status.state();
      if (status_state_ != "running") {
        status_changed_at_ = Clock::now();
        status_end_reason_ = status.end_reason();
      }
      return;
    }
  }
}

void SimulatedFleet::on_register(Call& call, const std::string& bytes) {
  Rank& r = ranks_[call.rank];
  pb::RegisterResponse resp;
  if (!call.status.ok() || !resp.ParseFromString(bytes)) {
    r.start_done = true;
    return;
  }
  last_register_answer_ = Clock::now();
  ++start_.registered;
  if (resp.rank() == call.rank) answered_ranks_.insert(resp.rank());
  start_.generations.insert(resp.generation());
  start_.register_response_bytes =
      std::max<std::int64_t>(start_.register_response_bytes, bytes.size());
  r.generation = resp.generation();
  r.registered = true;
  // The worker's heartbeat starts with its registration (CoordinatorClient::register_worker).
  r.last_report_sent = last_register_answer_;
  schedule_heartbeat(call.rank);
  send(call.rank, Rpc::kGetDataset, 0, pb::GetDatasetRequest().SerializeAsString());
}

void SimulatedFleet::on_plan(Call& call, const std::string& bytes) {
  const int epoch = static_cast<int>(call.arg);
  if (call.status.ok()) {
    largest_plan_bytes_ = std::max<std::int64_t>(largest_plan_bytes_, bytes.size());
    auto it = digest_of_payload_.find(bytes);
    if (it == digest_of_payload_.end()) {
      pb::EpochPlan message;
      if (!message.ParseFromString(bytes)) throw std::runtime_error("an EpochPlan does not parse");
      if (epoch == 0) {
        plan_batches_ = message.batches_size();
        plan_samples_ = 0;
        for (const pb::GlobalBatch& b : message.batches()) plan_samples_ += b.samples_size();
        first_batch_samples_ = plan_batches_ > 0 ? message.batches(0).samples_size() : 0;
      }
      it = digest_of_payload_.emplace(bytes, epoch_plan_digest(epoch_plan_from_proto(message)))
               .first;
    }
    plan_digests_[epoch].insert(it->second);
    ++plans_served_[epoch];
  }
  if (epoch == 0) ranks_[call.rank].start_done = true;
}

void SimulatedFleet::on_report(Call& call, const std::string& bytes) {
  Rank& r = ranks_[call.rank];
  r.report_in_flight = false;
  pb::ProgressAck ack;
  if (call.status.ok() && ack.ParseFromString(bytes) && ack.stop() && !r.told_stop) {
    r.told_stop = true;
    r.told_stop_at = Clock::now();
    if (!polling_) ++train_.stop_acks;
  }
  if (r.report_pending) {
    r.report_pending = false;
    send_report(call.rank, false);
  }
}

void SimulatedFleet::send_register(int rank, int restart_count, const std::string& cause) {
  pb::RegisterRequest req;
  req.set_rank(rank);
  req.set_world_size(options_.ranks);
  req.set_hostname("load-host-" + std::to_string(rank / 8));
  req.set_pid(100000 + rank);
  req.set_device("cuda:" + std::to_string(rank % 8));
  req.set_launcher("env");
  req.set_restart_count(restart_count);
  req.set_restart_cause(cause);
  send(rank, Rpc::kRegister, 0, req.SerializeAsString());
}

void SimulatedFleet::send_plan_request(int rank, int epoch) {
  pb::GetEpochPlanRequest req;
  req.set_epoch(epoch);
  send(rank, Rpc::kGetEpochPlan, epoch, req.SerializeAsString());
}

void SimulatedFleet::send_report(int rank, bool heartbeat) {
  Rank& r = ranks_[rank];
  if (r.silent || r.told_stop || r.finished || !r.registered) return;
  if (r.report_in_flight) {  // the sender thread sends the newest once the last is answered
    if (!heartbeat && r.report_pending) ++train_.coalesced;
    r.report_pending = r.report_pending || !heartbeat;
    return;
  }
  pb::ProgressReport req;
  req.set_rank(rank);
  req.set_global_step(r.step);
  req.set_epoch(plan_batches_ > 0 ? static_cast<int>(r.step / plan_batches_) : 0);
  req.set_loss(0.1 + 1.0 / static_cast<double>(r.step + 1));
  req.set_learning_rate(1e-4);
  req.set_samples(r.step);
  req.mutable_timings()->set_step_seconds(options_.step_seconds);
  req.set_samples_per_second(1.0 / options_.step_seconds);
  req.set_generation(r.generation);
  r.report_in_flight = true;
  r.last_report_sent = Clock::now();
  ++(heartbeat ? train_.heartbeats : train_.reports);
  send(rank, Rpc::kReport, r.step, req.SerializeAsString());
  schedule_heartbeat(rank);
}

void SimulatedFleet::schedule_heartbeat(int rank) {
  const Clock::time_point sent = ranks_[rank].last_report_sent;
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.heartbeat_seconds));
  at(sent + period, [this, rank, sent] {
    if (ranks_[rank].last_report_sent == sent) send_report(rank, true);
  });
}

void SimulatedFleet::send_commit(int rank, std::int64_t step) {
  pb::CheckpointReport req;
  req.set_rank(rank);
  req.set_global_step(step);
  char path[64];
  std::snprintf(path, sizeof path, "/ckpt/step-%08lld/rank-%05d", static_cast<long long>(step),
                rank);
  req.set_path(path);
  req.set_generation(ranks_[rank].generation);
  send(rank, Rpc::kCommit, step, req.SerializeAsString());
}

void SimulatedFleet::send_status() {
  if (!polling_) return;
  if (!status_in_flight_) {
    status_in_flight_ = true;
    send(-1, Rpc::kStatus, 0, pb::GetStatusRequest().SerializeAsString());
  }
  at(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(options_.status_poll_seconds)),
     [this] { send_status(); });
}

void SimulatedFleet::on_step(int rank, std::int64_t step) {
  --steps_due_;
  Rank& r = ranks_[rank];
  if (r.silent) return;
  r.step = step;
  send_report(rank, false);
  if (step % options_.checkpoint_every == 0) send_commit(rank, step);
  // The trainer asks for the next epoch's plan when it starts that epoch.
  if (plan_batches_ > 0 && step % plan_batches_ == 0 && step < options_.steps) {
    send_plan_request(rank, static_cast<int>(step / plan_batches_));
  }
}

void SimulatedFleet::at(Clock::time_point when, std::function<void()> fn) {
  timers_.push({when, timer_seq_++, std::move(fn)});
}

void SimulatedFleet::run_until(const std::function<bool()>& done, std::chrono::seconds timeout,
                               const std::string& what) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (!done()) {
    Clock::time_point now = Clock::now();
    if (now >= deadline) {
      throw std::runtime_error("load test: " + what + " not within " +
                               std::to_string(timeout.count()) + " s" +
                               (failures_.empty() ? "" : "; first failure: " + failures_[0]));
    }
    while (!timers_.empty() && timers_.top().at <= now) {
      const std::function<void()> fn = timers_.top().fn;
      timers_.pop();
      fn();
    }
    if (done()) break;
    Clock::time_point wake = std::min(deadline, now + std::chrono::milliseconds(100));
    if (!timers_.empty()) wake = std::min(wake, timers_.top().at);
    now = Clock::now();
    void* tag = nullptr;
    bool ok = false;
    const auto status =
        cq_.AsyncNext(&tag, &ok,
                      std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::max(Clock::duration::zero(), wake - now)));
    if (status == grpc::CompletionQueue::GOT_EVENT) {
      auto it = in_flight_.find(static_cast<Call*>(tag));
      std::unique_ptr<Call> call = std::move(it->second);
      in_flight_.erase(it);
      on_answer(*call);
    } else if (status == grpc::CompletionQueue::SHUTDOWN) {
      throw std::logic_error("load test: completion queue shut down");
    }
  }
}

int SimulatedFleet::count_ranks(const std::function<bool(const Rank&)>& pred) const {
  return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), pred));
}

double SimulatedFleet::connect(std::chrono::seconds timeout) {
  const Clock::time_point t0 = Clock::now();
  const auto deadline = std::chrono::system_clock::now() + timeout;
  for (Rank& r : ranks_) r.channel->GetState(/*try_to_connect=*/true);
  control_channel_->GetState(true);
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (!ranks_[i].channel->WaitForConnected(deadline)) {
      throw std::runtime_error("load test: rank " + std::to_string(i) + " did not connect within " +
                               std::to_string(timeout.count()) + " s");
    }
  }
  if (!control_channel_->WaitForConnected(deadline)) {
    throw std::runtime_error("load test: the JobControl channel did not connect");
  }
  return seconds_between(t0, Clock::now());
}

StartResult SimulatedFleet::start(int restart_count, const std::string& restart_cause,
                                  std::chrono::seconds timeout) {
  start_ = StartResult{};
  answered_ranks_.clear();
  for (Rank& r : ranks_) {
    // A restarted worker process: nothing of the last generation carries over (old heartbeat
    // timers see another last_report_sent and do nothing).
    r.registered = r.start_done = r.silent = r.told_stop = r.finished = false;
    r.report_pending = false;
    r.last_report_sent = Clock::time_point{};
  }
  const Clock::time_point t0 = Clock::now();
  for (int r = 0; r < options_.ranks; ++r) send_register(r, restart_count, restart_cause);
  const Clock::time_point last_sent = Clock::now();
  run_until(
      [&] { return count_ranks([](const Rank& r) { return r.start_done; }) == options_.ranks; },
      timeout, "every rank registered and holding epoch 0's plan");
  start_.seconds = seconds_between(t0, Clock::now());
  start_.barrier_release_seconds = seconds_between(last_sent, last_register_answer_);
  start_.distinct_ranks = static_cast<int>(answered_ranks_.size());
  return start_;
}

TrainResult SimulatedFleet::train(std::chrono::seconds timeout) {
  train_ = TrainResult{};
  const Clock::time_point t0 = Clock::now();
  std::uniform_real_distribution<double> skew(0.0, options_.step_skew_seconds);
  for (int s = 1; s <= options_.steps; ++s) {
    for (int r = 0; r < options_.ranks; ++r) {
      const double t = s * options_.step_seconds + skew(rng_);
      at(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t)),
         [this, r, s] { on_step(r, s); });
      ++steps_due_;
    }
  }
  run_until([&] { return steps_due_ == 0 && in_flight_.empty(); }, timeout,
            std::to_string(options_.steps) + " steps of every rank answered");
  train_.seconds = seconds_between(t0, Clock::now());
  return train_;
}

LeaseResult SimulatedFleet::expire_lease(int victim, std::chrono::seconds timeout) {
  Rank& v = ranks_.at(static_cast<std::size_t>(victim));
  v.silent = true;
  auto victim_busy = [&] {
    return std::any_of(in_flight_.begin(), in_flight_.end(),
                       [&](const auto& c) { return c.second->rank == victim; });
  };
  run_until([&] { return !victim_busy(); }, timeout, "the victim's last calls answered");
  const Clock::time_point last = v.last_sent;
  polling_ = true;
  status_state_.clear();
  status_changed_at_ = Clock::time_point{};
  first_status_lowest_step_ = -1;
  send_status();
  LeaseResult out;
  run_until([&] { return !status_state_.empty() && status_state_ != "running"; }, timeout,
            "the coordinator ended the generation of silent rank " + std::to_string(victim));
  if (!first_status_running_) {
    throw std::runtime_error("load test: the generation had ended before rank " +
                             std::to_string(victim) + " went silent (" + status_state_ + ": " +
                             status_end_reason_ + ")");
  }
  out.detect_seconds = seconds_between(last, status_changed_at_);
  out.lowest_step_reported = first_status_lowest_step_;
  out.state = status_state_;
  out.end_reason = status_end_reason_;
  auto told = [&] {
    return count_ranks([](const Rank& r) { return r.silent || r.told_stop; }) == options_.ranks;
  };
  run_until(told, timeout, "every other rank told to stop");
  for (const Rank& r : ranks_) {
    if (!r.silent)
      out.all_told_seconds = std::max(out.all_told_seconds, seconds_between(last, r.told_stop_at));
  }
  polling_ = false;
  run_until([&] { return !status_in_flight_; }, timeout, "the last status poll answered");
  return out;
}

double SimulatedFleet::finish(std::chrono::seconds timeout) {
  const Clock::time_point t0 = Clock::now();
  for (int r = 0; r < options_.ranks; ++r) {
    pb::FinishRequest req;
    req.set_rank(r);
    req.set_global_step(ranks_[r].step);
    req.set_ok(true);
    req.set_generation(ranks_[r].generation);
    send(r, Rpc::kFinish, 0, req.SerializeAsString());
  }
  run_until([&] { return count_ranks([](const Rank& r) { return r.finished; }) == options_.ranks; },
            timeout, "every rank's Finish answered");
  return seconds_between(t0, Clock::now());
}

}  // namespace lf::load
