// Worker side of the lorafleet.v1.Coordinator API. The interface uses lorafleet's own plain
// types (JobConfig text, Dataset, EpochPlan), never protobuf types, so that translation units
// that include LibTorch never see protobuf headers (the torch wheel bundles its own copy).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/checkpoint/train_position.h"
#include "common/data/dataset.h"
#include "common/data/epoch_plan.h"
#include "worker/rpc/client_security.h"

namespace lf {

// Thrown when the coordinator cannot be reached or answers with an error; what() names the
// address and the RPC. permanent(): the coordinator refused the request itself (a bad rank or
// world size, a wrong token, a torn --resume checkpoint, max_restarts exhausted, the job has
// ended): starting the rank again cannot help, so the worker exits 3, not 75.
class CoordinatorError : public std::runtime_error {
 public:
  explicit CoordinatorError(const std::string& what, bool permanent = false)
      : std::runtime_error(what), permanent_(permanent) {}
  bool permanent() const { return permanent_; }

 private:
  bool permanent_ = false;
};

// The coordinator refused an RPC with ABORTED: this rank's generation was superseded (a peer
// restarted) or ended (a peer failed or was lost). The rank must stop; its supervisor restarts
// it into the next generation.
class GroupSupersededError : public CoordinatorError {
 public:
  using CoordinatorError::CoordinatorError;
};

// How blocking RPCs retry a coordinator that is unreachable (UNAVAILABLE; also
// DEADLINE_EXCEEDED for idempotent RPCs), e.g. while it restarts from its durable state.
struct RetryPolicy {
  std::chrono::milliseconds initial_backoff = std::chrono::milliseconds(250);
  std::chrono::milliseconds max_backoff = std::chrono::seconds(5);  // doubling up to this
  std::chrono::milliseconds budget = std::chrono::minutes(10);      // total, per call
};

struct WorkerIdentity {
  int rank = 0;
  int world_size = 1;
  std::string hostname;
  int pid = 0;
  std::string device;   // "cpu" or "cuda:N"
  int metrics_port = 0; // 0 when disabled
  std::string launcher;            // "mpirun" | "env"
  // Rank 0 in env mode on GPUs: the NCCL unique id, relayed to all ranks.
  std::string nccl_unique_id;
  int restart_count = 0;           // LF_RESTART_COUNT from lorafleet-launch
  std::string restart_cause;       // LF_RESTART_CAUSE
  int max_restarts = -1;           // LF_MAX_RESTARTS (lorafleet-launch --max-restarts); -1: unset
  // --resume as given: "" (fresh), "auto" (newest checkpoint of output_dir, if any) or an
  // absolute path. The coordinator resolves it once for the whole group.
  std::string resume;
};

struct JobAssignment {
  int rank = 0;
  int world_size = 1;
  std::string job_config_yaml;
  std::string job_config_name;
  std::string base_dir;
  std::string dataset_config_toml;  // the kohya .toml's text, "" without dataset_config
  std::string sample_prompts_text;  // output.sample_prompts' text, "" without one
  std::uint64_t shared_seed = 0;
  std::int64_t max_train_steps = 0;
  int num_epochs = 0;
  std::uint64_t generation = 0;
  std::string nccl_unique_id;  // rank 0's, relayed (env mode on GPUs)
  // The checkpoint the coordinator chose for the whole group and checked against the job
  // (RegisterResponse.resume_point); nullopt: a fresh run.
  std::optional<CheckpointPosition> resume;
  // Operator sample-now requests before this generation (ranks act only on later ones).
  std::int64_t sample_now_id = 0;
};

// What an operator asked through lorafleet.v1.JobControl, as the latest heartbeat answer
// (ProgressAck) said. Ranks learn it at different moments; the trainer agrees on the step in its
// gradient allreduce.
struct OperatorAsk {
  bool stop = false;               // stop after an agreed step: checkpoint, LoRA, exit 0
  bool cancel = false;             // exit at once with kExitCancelled
  std::int64_t sample_now_id = 0;  // sample-now requests so far (monotonic)
  std::string reason;              // who asked, for the logs
};

// How a rank ended, for CoordinatorClient::finish (lorafleet.v1.FinishRequest).
struct FinishReport {
  int rank = 0;
  std::int64_t global_step = 0;
  bool ok = true;
  std::string error;       // !ok: why
  bool preempted = false;  // stopped on SIGTERM after committing a checkpoint (exit 143)
  bool permanent = false;  // failed on bad input (exit 3): the job ends, no restart
  bool stopped = false;    // stopped on an operator's stop / SIGINT after a checkpoint (exit 0)
  bool cancelled = false;  // exits on an operator's cancel (exit 4)
};

struct ProgressUpdate {
  int rank = 0;
  std::int64_t global_step = 0;
  int epoch = 0;
  double loss = 0.0;
  double learning_rate = 0.0;
  std::int64_t samples = 0;
  double step_seconds = 0.0;
  double allreduce_seconds = 0.0;
  double data_wait_seconds = 0.0;
  double samples_per_second = 0.0;
  // The latest validation loss and the step it ran after (0: none yet), repeated by every
  // later update.
  double validation_loss = 0.0;
  std::int64_t validation_step = 0;
};

// One operation on the generation's rendezvous store (lorafleet.v1 RendezvousRequest; the
// KeyValueRendezvous operations of common/rendezvous/key_value_rendezvous.h).
struct RendezvousOp {
  enum class Kind { kSet, kGet, kAdd, kCompareSet, kDelete, kCheck, kNumKeys, kWait };
  Kind kind = Kind::kGet;
  std::vector<std::string> keys;
  std::string value;                  // kSet; kCompareSet: the desired value
  std::string expected;               // kCompareSet
  std::int64_t delta = 0;             // kAdd
  std::chrono::milliseconds wait{0};  // kGet / kWait: longest the coordinator holds it
};
struct RendezvousResult {
  bool found = false;       // kGet / kWait / kCheck: present; kDelete: existed
  std::string value;        // kGet, kCompareSet
  std::int64_t number = 0;  // kAdd, kNumKeys
};

class CoordinatorClient {
 public:
  // address = "host:port". Does not connect yet. `security`: the job token sent with every RPC
  // and TLS (see client_security.h); the default is plaintext without a token. `retry`: how long
  // and how often RPCs are retried while the coordinator is unreachable.
  explicit CoordinatorClient(const std::string& address, const ClientSecurity& security = {},
                             const RetryPolicy& retry = {});
  ~CoordinatorClient();

  // Registers and waits until every rank has registered. Retries "unavailable" with backoff
  // until connect_timeout_seconds have passed, then throws CoordinatorError
  // "cannot reach the coordinator at <address> ...". Remembers the generation it joined; every
  // later report carries it.
  JobAssignment register_worker(const WorkerIdentity& me, int connect_timeout_seconds);
  // The dataset as scanned by the coordinator (paths, captions, buckets). Throws
  // CoordinatorError once the retry budget is spent.
  Dataset get_dataset();
  // The plan of one epoch. Throws CoordinatorError on failure (after retries).
  EpochPlan get_epoch_plan(int epoch);
  // Fire-and-forget from the caller's view: queued and sent by a background thread, so a
  // training step never waits on the coordinator. Only the newest pending update is kept; an
  // unreachable coordinator only delays it (resent with the next heartbeat).
  void report_progress_async(const ProgressUpdate& update);
  // Blocking for at most `budget` (retries while the coordinator is unreachable): reports that
  // this rank's part of checkpoint `global_step` is durable. kCommitted: the coordinator has
  // seen every rank; kPending: not all ranks yet; kUnacknowledged: the coordinator stayed
  // unreachable for `budget` (logged; the checkpoint's COMMITTED file on disk, which
  // --resume auto reads, does not depend on it). Never waiting longer keeps a rank cut off from
  // the coordinator from outliving its peers, which give up at the next collective. Throws
  // GroupSupersededError when this rank's generation is over, CoordinatorError on a refusal.
  enum class CommitAck { kCommitted, kPending, kUnacknowledged };
  CommitAck commit_checkpoint(int rank, std::int64_t global_step, const std::string& path,
                              std::chrono::milliseconds budget);
  // One rendezvous store operation as rank `rank` of the registered generation. Retries an
  // unreachable coordinator for at most `budget` (non-idempotent ADD / COMPARE_SET only on
  // UNAVAILABLE). Throws GroupSupersededError when the generation is over, CoordinatorError
  // (permanent() for a refusal: token, limits, bad request) otherwise.
  RendezvousResult rendezvous(int rank, const RendezvousOp& op, std::chrono::milliseconds budget);
  // Blocking, best effort (errors are logged, not thrown; retries while unreachable): this rank
  // is done, as `report` says (see FinishReport).
  void finish(const FinishReport& report);

  // Whether the coordinator said this rank's generation is over (ABORTED on any RPC, including
  // the background progress reports): the trainer should stop. Thread-safe.
  bool superseded() const;
  // Throws the GroupSupersededError the background sender stored, if any (what() is the
  // coordinator's reason). For the trainer's step loop.
  void throw_if_superseded() const;
  // Shortens (or lengthens) how long later blocking RPCs retry an unreachable coordinator; the
  // failure path uses a brief budget, since the coordinator may be what was lost.
  void set_retry_budget(std::chrono::milliseconds budget);
  // Whether a progress acknowledgement asked this rank to stop, and why (also set when
  // superseded). Thread-safe.
  bool stop_requested() const;
  std::string stop_reason() const;
  // What an operator asked, as the latest heartbeat answer said. Thread-safe.
  OperatorAsk operator_ask() const;
  // Called once, on the heartbeat thread, when a heartbeat answer carries an operator's cancel
  // (with its reason). The worker reports it and exits from there: a cancel does not wait for
  // the step. Set it before register_worker.
  void set_on_cancel(std::function<void(const std::string& reason)> on_cancel);
  // The generation from register_worker (0 before). Thread-safe.
  std::uint64_t generation() const;

  const std::string& address() const { return address_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace lf
