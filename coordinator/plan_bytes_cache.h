// The lorafleet.v1.EpochPlan message bytes of epoch plans, converted and serialized once per plan
// object. Every rank is served the same plan at about the same moment (at start-up and at each
// epoch boundary), so one coordinator serving N ranks costs one conversion and serialization
// instead of N (bench/README.md, "Many workers against one coordinator": 11 ms of CPU per
// request for a 1 MB plan, ~6 s per epoch boundary at 512 ranks before). The bytes are a
// refcounted grpc::Slice, so each answer only references them.
#pragma once

#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/data/epoch_plan.h"

namespace lf {

class PlanBytesCache {
 public:
  // Keeps the bytes of the `capacity` plans asked for most recently (at least 1).
  explicit PlanBytesCache(std::size_t capacity = 4);

  // to_proto(*plan) serialized: built on the first call for this plan object, which callers for
  // the same plan wait for. Entries are keyed by the object (CoordinatorJob builds a replanned
  // epoch as a new one) and hold it weakly, so a plan freed by its owner is never confused with
  // a later one at the same address. Thread-safe.
  grpc::Slice bytes(const std::shared_ptr<const EpochPlan>& plan);
  // Plans converted and serialized so far (for tests and figures). Thread-safe.
  std::int64_t serializations() const;

 private:
  struct Entry {
    std::weak_ptr<const EpochPlan> plan;
    grpc::Slice bytes;
  };
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;  // oldest first
  std::int64_t serializations_ = 0;
};

// to_proto(plan) serialized into a slice (no cache).
grpc::Slice epoch_plan_bytes(const EpochPlan& plan);

}  // namespace lf
