// gRPC client for lorafleet.v1.Coordinator, with retry on "unavailable" during registration and a
// background sender for progress reports (only the newest pending report is kept: it carries
// cumulative counters, so dropping an older one loses nothing). The sender also repeats the last
// report as a heartbeat every kHeartbeat while nothing new comes (model loading, long steps), so
// the coordinator can tell a slow rank from a dead one (coordinator.worker_timeout_seconds).
#include "worker/rpc/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "common/util/log.h"
#include "lorafleet/v1/coordinator.grpc.pb.h"
#include "proto/proto_convert.h"

namespace lf {
namespace pb = lorafleet::v1;

namespace {

std::string describe(const grpc::Status& s) {
  return std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message();
}

}  // namespace

constexpr auto kHeartbeat = std::chrono::seconds(5);

struct CoordinatorClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Coordinator::Stub> stub;

  // Progress sender.
  std::mutex mu;
  std::condition_variable cv;
  std::optional<ProgressUpdate> pending;
  std::optional<ProgressUpdate> last_sent;  // set once registered; repeated as the heartbeat
  bool stopping = false;
  std::thread sender;

  void send_loop(const std::string& address) {
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
      pb::ProgressAck ack;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      grpc::Status s = stub->ReportProgress(&ctx, req, &ack);
      if (!s.ok()) LF_DEBUG("progress report to " << address << " failed: " << describe(s));
      lock.lock();
    }
  }
};

CoordinatorClient::CoordinatorClient(const std::string& address)
    : impl_(std::make_unique<Impl>()), address_(address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxPlanMessageBytes);  // plans of large datasets
  impl_->channel =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  impl_->stub = pb::Coordinator::NewStub(impl_->channel);
  impl_->sender = std::thread([this] { impl_->send_loop(address_); });
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
  req.set_rendezvous_address(me.rendezvous_address);
  req.set_nccl_unique_id(me.nccl_unique_id);
  req.set_restart_count(me.restart_count);
  req.set_restart_cause(me.restart_cause);

  const auto connect_deadline =
      std::chrono::system_clock::now() + std::chrono::seconds(connect_timeout_seconds);
  // Connect first (with backoff), so "unreachable" is told apart from "waiting for peers".
  if (!impl_->channel->WaitForConnected(connect_deadline)) {
    throw CoordinatorError("cannot reach the coordinator at " + address_ + " (waited " +
                           std::to_string(connect_timeout_seconds) +
                           " s; is lorafleet-coordinator running and is the address right?)");
  }
  pb::RegisterResponse resp;
  grpc::ClientContext ctx;
  // Registration blocks until every rank has joined; peers may still be starting up.
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(600));
  ctx.set_wait_for_ready(true);
  grpc::Status s = impl_->stub->Register(&ctx, req, &resp);
  if (!s.ok()) {
    throw CoordinatorError("coordinator at " + address_ + " refused Register for rank " +
                           std::to_string(me.rank) + ": " + describe(s));
  }
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
  a.shared_seed = resp.shared_seed();
  a.max_train_steps = resp.max_train_steps();
  a.num_epochs = resp.num_epochs();
  a.generation = resp.generation();
  a.rendezvous_address = resp.rendezvous_address();
  a.nccl_unique_id = resp.nccl_unique_id();
  return a;
}

Dataset CoordinatorClient::get_dataset() {
  pb::GetDatasetRequest req;
  pb::DatasetManifest resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  grpc::Status s = impl_->stub->GetDataset(&ctx, req, &resp);
  if (!s.ok()) throw CoordinatorError("GetDataset from " + address_ + " failed: " + describe(s));
  return dataset_from_proto(resp);
}

EpochPlan CoordinatorClient::get_epoch_plan(int epoch) {
  pb::GetEpochPlanRequest req;
  req.set_epoch(epoch);
  pb::EpochPlan resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  grpc::Status s = impl_->stub->GetEpochPlan(&ctx, req, &resp);
  if (!s.ok()) {
    throw CoordinatorError("GetEpochPlan(" + std::to_string(epoch) + ") from " + address_ +
                           " failed: " + describe(s));
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

bool CoordinatorClient::commit_checkpoint(int rank, std::int64_t global_step,
                                          const std::string& path) {
  pb::CheckpointReport req;
  req.set_rank(rank);
  req.set_global_step(global_step);
  req.set_path(path);
  pb::CheckpointAck ack;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::Status s = impl_->stub->CommitCheckpoint(&ctx, req, &ack);
  if (!s.ok()) {
    throw CoordinatorError("CommitCheckpoint(step " + std::to_string(global_step) + ") to " +
                           address_ + " failed: " + describe(s));
  }
  return ack.committed();
}

void CoordinatorClient::finish(int rank, std::int64_t global_step, bool ok,
                               const std::string& error) {
  pb::FinishRequest req;
  req.set_rank(rank);
  req.set_global_step(global_step);
  req.set_ok(ok);
  req.set_error(error);
  pb::FinishAck ack;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = impl_->stub->Finish(&ctx, req, &ack);
  if (!s.ok()) LF_WARN("Finish to " << address_ << " failed: " << describe(s));
}

}  // namespace lf
