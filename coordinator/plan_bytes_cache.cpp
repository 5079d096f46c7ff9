// PlanBytesCache: a short list searched by owner (control block), newest last.
#include "coordinator/plan_bytes_cache.h"

#include <algorithm>
#include <string>

#include "lorafleet/v1/coordinator.pb.h"
#include "proto/proto_convert.h"

namespace lf {

grpc::Slice epoch_plan_bytes(const EpochPlan& plan) {
  lorafleet::v1::EpochPlan message;
  to_proto(plan, &message);
  return grpc::Slice(message.SerializeAsString());
}

PlanBytesCache::PlanBytesCache(std::size_t capacity)
    : capacity_(std::max<std::size_t>(capacity, 1)) {}

grpc::Slice PlanBytesCache::bytes(const std::shared_ptr<const EpochPlan>& plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Same owner: the very object (an expired entry never matches a live plan).
  const auto same = [&](const Entry& e) {
    return !e.plan.owner_before(plan) && !plan.owner_before(e.plan) && !e.plan.expired();
  };
  const auto it = std::find_if(entries_.begin(), entries_.end(), same);
  if (it != entries_.end()) {
    Entry hit = *it;
    entries_.erase(it);
    entries_.push_back(hit);
    return hit.bytes;
  }
  // Built under the lock: the other ranks asking for this plan wait for this one build.
  entries_.push_back({plan, epoch_plan_bytes(*plan)});
  ++serializations_;
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [](const Entry& e) { return e.plan.expired(); }),
                 entries_.end());
  if (entries_.size() > capacity_) entries_.erase(entries_.begin());
  return entries_.back().bytes;
}

std::int64_t PlanBytesCache::serializations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return serializations_;
}

}  // namespace lf
