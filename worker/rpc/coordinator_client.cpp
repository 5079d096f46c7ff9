// gRPC client for lorafleet.v1.Coordinator. Blocking RPCs go through Impl::call, which makes
// one ClientContext per attempt and retries a coordinator that is unreachable (it may be
// restarting from its durable state) with exponential backoff within a budget. Progress reports
// go through a background sender (only the newest pending report is kept: it carries cumulative
// counters, so dropping an older one loses nothing). The sender also repeats the last report as
// a heartbeat every kHeartbeat while nothing new comes (model loading, long steps), so the
// coordinator can tell a slow rank from a dead one (coordinator.worker_timeout_seconds); it
// never retries in a loop, so a step never waits on it.
#include "worker/rpc/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/util/log.h"
#include "lorafleet/v1/coordinator.grpc.pb.h"
#include "proto/proto_convert.h"
#include "worker/rpc/coordinator_channel.h"

namespace lf {
namespace pb = lorafleet::v1;

namespace {

// A refusal the coordinator will repeat on every retry: see CoordinatorError::permanent().
bool is_permanent(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return true;
    default:
      return false;
  }
}

}  // namespace

constexpr auto kHeartbeat = std::chrono::seconds(5);

struct CoordinatorClient::Impl {
  std::string address;
  RetryPolicy retry;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Coordinator::Stub> stub;
  std::atomic<std::uint64_t> generation{0};

  // What the coordinator told us about our generation.
  mutable std::mutex status_mu;
  bool superseded = false;
  bool stop = false;
  std::string stop_reason;
  OperatorAsk ask;
  std::function<void(const std::string&)> on_cancel;  // heartbeat thread only, once
  bool cancel_seen = false;

  std::string job_token;  // "" sends no authorization metadata

  // Call right after creating each grpc::ClientContext: adds what every RPC must carry.
  void prepare(grpc::ClientContext* ctx) const { add_job_token(ctx, job_token); }

  // Progress sender.
  std::mutex mu;
  std::condition_variable cv;
  std::optional<ProgressUpdate> pending;
  std::optional<ProgressUpdate> last_sent;  // set once registered; repeated as the heartbeat
  bool stopping = false;
  bool progress_failing = false;  // sender thread only
  std::thread sender;

  void note_stop(const std::string& reason, bool is_superseded) {
    std::lock_guard<std::mutex> lock(status_mu);
    if (is_superseded && !superseded) LF_WARN("this rank's generation is over: " << reason);
    superseded = superseded || is_superseded;
    if (!stop) stop_reason = reason;
    stop = true;
  }

  // Records what an operator asked; a cancel runs on_cancel (once), which normally exits.
  void note_operator(const pb::ProgressAck& ack) {
    bool cancel_now = false;
    {
      std::lock_guard<std::mutex> lock(status_mu);
      ask.stop = ack.operator_stop();
      ask.cancel = ack.operator_cancel();
      ask.sample_now_id = std::max(ask.sample_now_id, ack.sample_now_id());
      ask.reason = ack.operator_reason();
      cancel_now = ask.cancel && !cancel_seen;
      cancel_seen = cancel_seen || ask.cancel;
    }
    if (cancel_now && on_cancel) on_cancel(ack.operator_reason());
  }

  // Runs `rpc(&ctx)` with a fresh context per attempt until it returns a status that is not
  // retryable (UNAVAILABLE always is; DEADLINE_EXCEEDED when idempotent) or `budget` (default
  // retry.budget) is spent; returns the last status. Logs one WARN when retrying starts, one
  // INFO when through.
  template <class Rpc>
  grpc::Status call(const std::string& what, bool idempotent, std::chrono::seconds per_attempt,
                    bool wait_for_ready, std::chrono::milliseconds budget, Rpc&& rpc) {
    const auto start = std::chrono::steady_clock::now();
    auto backoff = retry.initial_backoff;
    bool retrying = false;
    while (true) {
      grpc::ClientContext ctx;
      prepare(&ctx);
      // One attempt never outlasts the whole budget (a dropped link makes connects hang).
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          budget - (std::chrono::steady_clock::now() - start));
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::max(std::chrono::milliseconds(100),
                                std::min<std::chrono::milliseconds>(per_attempt, left)));
      ctx.set_wait_for_ready(wait_for_ready);
      const grpc::Status s = rpc(&ctx);
      const bool retryable = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                             (idempotent && s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
      if (!retryable) {
        if (retrying && s.ok()) LF_INFO(what << ": reconnected to the coordinator at " << address);
        if (s.error_code() == grpc::StatusCode::ABORTED) note_stop(s.error_message(), true);
        return s;
      }
      const auto elapsed = std::chrono::steady_clock::now() - start;
      if (elapsed + backoff > budget) return s;
      if (!retrying) {
        LF_WARN(what << ": the coordinator at " << address << " is unreachable ("
                     << describe_status(s) << "); retrying for up to "
                     << std::chrono::duration_cast<std::chrono::seconds>(budget).count() << " s");
        retrying = true;
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(retry.max_backoff, backoff * 2);
    }
  }

  void send_loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      const bool woken =
          cv.wait_for(lock, kHeartbeat, [&] { return stopping || pending.has_value(); });
      if (stopping && !pending) return;  // nothing left to send
      if (!woken && !last_sent) continue;  // not registered yet: nobody to heartbeat to
      ProgressUpdate u = pending ? *pending : *last_sent;
      pending.reset();
      last_sent = u;
      lock.unlock();
      pb::ProgressReport req;
      req.set_rank(u.rank);
      req.set_global_step(u.global_step);
      req.set_epoch(u.epoch);
      req.set_loss(u.loss);
      req.set_learning_rate(u.learning_rate);
      req.set_samples(u.samples);
      req.mutable_timings()->set_step_seconds(u.step_seconds);
      req.mutable_timings()->set_allreduce_seconds(u.allreduce_seconds);
      req.mutable_timings()->set_data_wait_seconds(u.data_wait_seconds);
      req.set_samples_per_second(u.samples_per_second);
      req.set_validation_loss(u.validation_loss);
      req.set_validation_step(u.validation_step);
      req.set_generation(generation.load());
      pb::ProgressAck ack;
      grpc::ClientContext ctx;
      prepare(&ctx);
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      const grpc::Status s = stub->ReportProgress(&ctx, req, &ack);
      if (s.ok()) {
        if (progress_failing)
          LF_INFO("progress reports reach the coordinator at " << address << " again");
        progress_failing = false;
        if (ack.stop()) note_stop(ack.stop_reason(), false);
        note_operator(ack);
      } else if (s.error_code() == grpc::StatusCode::ABORTED) {
        note_stop(s.error_message(), true);
      } else if (!progress_failing) {
        // The newest report is resent with the next heartbeat; training goes on meanwhile.
        LF_WARN("progress report to " << address << " failed (" << describe_status(s)
                                      << "); training goes on, reports resume when it answers");
        progress_failing = true;
      }
      lock.lock();
    }
  }
};

CoordinatorClient::CoordinatorClient(const std::string& address, const ClientSecurity& security,
                                     const RetryPolicy& retry)
    : impl_(std::make_unique<Impl>()), address_(address) {
  impl_->address = address;
  impl_->retry = retry;
  impl_->job_token = security.job_token;
  impl_->channel = make_coordinator_channel(address, security);
  impl_->stub = pb::Coordinator::NewStub(impl_->channel);
  impl_->sender = std::thread([this] { impl_->send_loop(); });
}

CoordinatorClient::~CoordinatorClient() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->sender.joinable()) impl_->sender.join();
}

JobAssignment CoordinatorClient::register_worker(const WorkerIdentity& me,
                                                 int connect_timeout_seconds) {
  pb::RegisterRequest req;
  req.set_rank(me.rank);
  req.set_world_size(me.world_size);
  req.set_hostname(me.hostname);
  req.set_pid(me.pid);
  req.set_device(me.device);
  req.set_metrics_port(me.metrics_port);
  req.set_launcher(me.launcher);
  req.set_nccl_unique_id(me.nccl_unique_id);
  req.set_restart_count(me.restart_count);
  req.set_restart_cause(me.restart_cause);
  if (me.max_restarts >= 0) req.set_max_restarts(me.max_restarts);
  if (!me.resume.empty()) req.mutable_resume_point()->set_checkpoint(me.resume);

  const auto connect_deadline =
      std::chrono::system_clock::now() + std::chrono::seconds(connect_timeout_seconds);
  // Connect first (with backoff), so "unreachable" is told apart from "waiting for peers".
  if (!impl_->channel->WaitForConnected(connect_deadline)) {
    throw CoordinatorError("cannot reach the coordinator at " + address_ + " (waited " +
                           std::to_string(connect_timeout_seconds) +
                           " s; is lorafleet-coordinator running and is the address right?)");
  }
  pb::RegisterResponse resp;
  // Registration blocks until every rank has joined; peers may still be starting up. Not
  // idempotent: a DEADLINE_EXCEEDED is the barrier's own timeout and is reported.
  const grpc::Status s =
      impl_->call("Register", /*idempotent=*/false, std::chrono::seconds(600),
                  /*wait_for_ready=*/true, impl_->retry.budget,
                  [&](grpc::ClientContext* ctx) { return impl_->stub->Register(ctx, req, &resp); });
  if (!s.ok()) {
    throw CoordinatorError("coordinator at " + address_ + " refused Register for rank " +
                               std::to_string(me.rank) + ": " + describe_status(s),
                           is_permanent(s));
  }
  impl_->generation.store(resp.generation());
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ProgressUpdate first;
    first.rank = resp.rank();
    impl_->last_sent = first;  // starts the heartbeat
  }
  JobAssignment a;
  a.rank = resp.rank();
  a.world_size = resp.world_size();
  a.job_config_yaml = resp.job_config_yaml();
  a.job_config_name = resp.job_config_name();
  a.base_dir = resp.base_dir();
  a.dataset_config_toml = resp.dataset_config_toml();
  a.sample_prompts_text = resp.sample_prompts_text();
  a.shared_seed = resp.shared_seed();
  a.max_train_steps = resp.max_train_steps();
  a.num_epochs = resp.num_epochs();
  a.generation = resp.generation();
  a.nccl_unique_id = resp.nccl_unique_id();
  a.sample_now_id = resp.sample_now_id();
  {
    std::lock_guard<std::mutex> lock(impl_->status_mu);
    impl_->ask.sample_now_id = std::max(impl_->ask.sample_now_id, a.sample_now_id);
  }
  if (resp.has_resume_point()) {
    try {
      a.resume = checkpoint_position_from_proto(
          resp.resume_point(), "the coordinator's resume point (RegisterResponse)");
    } catch (const std::runtime_error& e) {
      throw CoordinatorError(std::string("coordinator at ") + address_ + ": " + e.what(),
                             /*permanent=*/true);
    }
  }
  return a;
}

Dataset CoordinatorClient::get_dataset() {
  pb::GetDatasetRequest req;
  pb::DatasetManifest resp;
  const grpc::Status s = impl_->call(
      "GetDataset", true, std::chrono::seconds(120), false, impl_->retry.budget,
      [&](grpc::ClientContext* ctx) { return impl_->stub->GetDataset(ctx, req, &resp); });
  if (!s.ok()) {
    throw CoordinatorError("GetDataset from " + address_ + " failed: " + describe_status(s),
                           is_permanent(s));
  }
  return dataset_from_proto(resp);
}

EpochPlan CoordinatorClient::get_epoch_plan(int epoch) {
  pb::GetEpochPlanRequest req;
  req.set_epoch(epoch);
  pb::EpochPlan resp;
  const grpc::Status s = impl_->call(
      "GetEpochPlan", true, std::chrono::seconds(120), false, impl_->retry.budget,
      [&](grpc::ClientContext* ctx) { return impl_->stub->GetEpochPlan(ctx, req, &resp); });
  if (!s.ok()) {
    throw CoordinatorError("GetEpochPlan(" + std::to_string(epoch) + ") from " + address_ +
                               " failed: " + describe_status(s),
                           is_permanent(s));
  }
  return epoch_plan_from_proto(resp);
}

void CoordinatorClient::report_progress_async(const ProgressUpdate& update) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->pending = update;
  }
  impl_->cv.notify_one();
}

CoordinatorClient::CommitAck CoordinatorClient::commit_checkpoint(
    int rank, std::int64_t global_step, const std::string& path, std::chrono::milliseconds budget) {
  pb::CheckpointReport req;
  req.set_rank(rank);
  req.set_global_step(global_step);
  req.set_path(path);
  req.set_generation(impl_->generation.load());
  pb::CheckpointAck ack;
  // Idempotent: the coordinator counts each rank once per step.
  const grpc::Status s = impl_->call(
      "CommitCheckpoint", true, std::chrono::seconds(60), false,
      std::min(budget, impl_->retry.budget),
      [&](grpc::ClientContext* ctx) { return impl_->stub->CommitCheckpoint(ctx, req, &ack); });
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    LF_WARN("CommitCheckpoint(step " << global_step << ") to " << address_ << ": "
                                     << describe_status(s) << " for "
                                     << std::chrono::duration<double>(budget).count()
                                     << " s; training goes on (the checkpoint is durable on disk)");
    return CommitAck::kUnacknowledged;
  }
  if (!s.ok()) {
    const std::string msg = "CommitCheckpoint(step " + std::to_string(global_step) + ") to " +
                            address_ + " failed: " + describe_status(s);
    if (s.error_code() == grpc::StatusCode::ABORTED) throw GroupSupersededError(msg);
    throw CoordinatorError(msg, is_permanent(s));
  }
  return ack.committed() ? CommitAck::kCommitted : CommitAck::kPending;
}

RendezvousResult CoordinatorClient::rendezvous(int rank, const RendezvousOp& op,
                                               std::chrono::milliseconds budget) {
  using Kind = RendezvousOp::Kind;
  static const std::map<Kind, pb::RendezvousRequest::Op> kOps = {
      {Kind::kSet, pb::RendezvousRequest::SET},
      {Kind::kGet, pb::RendezvousRequest::GET},
      {Kind::kAdd, pb::RendezvousRequest::ADD},
      {Kind::kCompareSet, pb::RendezvousRequest::COMPARE_SET},
      {Kind::kDelete, pb::RendezvousRequest::DELETE},
      {Kind::kCheck, pb::RendezvousRequest::CHECK},
      {Kind::kNumKeys, pb::RendezvousRequest::NUM_KEYS},
      {Kind::kWait, pb::RendezvousRequest::WAIT}};
  pb::RendezvousRequest req;
  req.set_rank(rank);
  req.set_generation(impl_->generation.load());
  req.set_op(kOps.at(op.kind));
  for (const std::string& k : op.keys) req.add_keys(k);
  req.set_value(op.value);
  req.set_expected(op.expected);
  req.set_delta(op.delta);
  req.set_wait_ms(op.wait.count());
  // Every op but these may be repeated after a lost answer with the same result.
  const bool idempotent = op.kind != Kind::kAdd && op.kind != Kind::kCompareSet;
  const auto per_attempt =
      std::chrono::duration_cast<std::chrono::seconds>(op.wait) + std::chrono::seconds(10);
  pb::RendezvousResponse resp;
  const grpc::Status s = impl_->call(
      "Rendezvous", idempotent, per_attempt, /*wait_for_ready=*/false, budget,
      [&](grpc::ClientContext* ctx) { return impl_->stub->Rendezvous(ctx, req, &resp); });
  if (s.error_code() == grpc::StatusCode::ABORTED) {
    throw GroupSupersededError("rendezvous store of generation " +
                               std::to_string(req.generation()) + ": " + s.error_message());
  }
  if (!s.ok()) {
    throw CoordinatorError(
        "coordinator at " + address_ + " refused a rendezvous " +
            pb::RendezvousRequest::Op_Name(req.op()) + " of rank " + std::to_string(rank) + ": " +
            describe_status(s),
        is_permanent(s) || s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  return {resp.found(), resp.value(), resp.number()};
}

void CoordinatorClient::set_retry_budget(std::chrono::milliseconds budget) {
  impl_->retry.budget = budget;
}

void CoordinatorClient::finish(const FinishReport& report) {
  pb::FinishRequest req;
  req.set_rank(report.rank);
  req.set_global_step(report.global_step);
  req.set_ok(report.ok);
  req.set_error(report.error);
  req.set_generation(impl_->generation.load());
  req.set_preempted(report.preempted);
  req.set_permanent(report.permanent);
  req.set_stopped(report.stopped);
  req.set_cancelled(report.cancelled);
  pb::FinishAck ack;
  // Idempotent: a repeated Finish of a finished rank is ignored. A client that never
  // registered (a rank failing before or without joining) tries briefly: nobody waits on it.
  const auto budget = impl_->generation.load() == 0
                          ? std::min<std::chrono::milliseconds>(impl_->retry.budget, kHeartbeat * 2)
                          : impl_->retry.budget;
  const grpc::Status s =
      impl_->call("Finish", true, std::chrono::seconds(10), false, budget,
                  [&](grpc::ClientContext* ctx) { return impl_->stub->Finish(ctx, req, &ack); });
  if (!s.ok()) LF_WARN("Finish to " << address_ << " failed: " << describe_status(s));
}

bool CoordinatorClient::superseded() const {
  std::lock_guard<std::mutex> lock(impl_->status_mu);
  return impl_->superseded;
}

void CoordinatorClient::throw_if_superseded() const {
  std::lock_guard<std::mutex> lock(impl_->status_mu);
  if (impl_->superseded) {
    throw GroupSupersededError("coordinator at " + address_ + ": " + impl_->stop_reason);
  }
}

bool CoordinatorClient::stop_requested() const {
  std::lock_guard<std::mutex> lock(impl_->status_mu);
  return impl_->stop;
}

std::string CoordinatorClient::stop_reason() const {
  std::lock_guard<std::mutex> lock(impl_->status_mu);
  return impl_->stop_reason;
}

OperatorAsk CoordinatorClient::operator_ask() const {
  std::lock_guard<std::mutex> lock(impl_->status_mu);
  return impl_->ask;
}

void CoordinatorClient::set_on_cancel(std::function<void(const std::string&)> on_cancel) {
  impl_->on_cancel = std::move(on_cancel);
}

std::uint64_t CoordinatorClient::generation() const { return impl_->generation.load(); }

}  // namespace lf
