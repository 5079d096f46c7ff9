// A job the coordinator's durable state (state_store.h) records as finished: what a coordinator
// restarted on it reports instead of waiting for workers that will not come.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "coordinator/state_store.h"

namespace lf {

struct FinishedJob {
  std::int64_t global_step = 0;      // the final committed checkpoint's step (= max_train_steps)
  std::string checkpoint;            // its directory
  std::string reason;                // why the job ended (StateStore::record_job_done)
  int world_size = 0;                // the world size it trained on
  std::int64_t max_train_steps = 0;  // the job's length at that world size
};

// The finished job `stored` records: done with exit 0 and a last committed checkpoint at or past
// `max_train_steps` (the job's length at stored.world_size). nullopt for a job that is running,
// failed, was cancelled, or was stopped before its end (lorafleet-ctl stop, a raised
// max_train_steps): such a job can still be trained, so it starts a fresh record as before.
std::optional<FinishedJob> finished_job_of(const StoredJob& stored, std::int64_t max_train_steps);

// "the job had already finished (<reason>); final checkpoint <dir> at global_step <N>".
std::string describe(const FinishedJob& f);

}  // namespace lf
