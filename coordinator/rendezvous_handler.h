// lorafleet.v1.Coordinator/Rendezvous on a generation's KeyValueStore: the translation between
// the wire request and the store's operations, apart from the service's checks (token,
// generation, rank), which CoordinatorService makes first.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "common/rendezvous/key_value_store.h"
#include "lorafleet/v1/coordinator.pb.h"

namespace lf {

// Longest a GET or WAIT is held on the coordinator; the client asks again until its timeout.
inline constexpr std::chrono::milliseconds kMaxRendezvousHold = std::chrono::seconds(10);

// Runs `request` on `store`. INVALID_ARGUMENT for an unknown op, a wrong number of keys or a
// non-integer ADD; RESOURCE_EXHAUSTED beyond the store's limits (key, value, key count). Blocks
// up to min(wait_ms, kMaxRendezvousHold) for GET and WAIT.
grpc::Status serve_rendezvous(KeyValueStore& store, const lorafleet::v1::RendezvousRequest& request,
                              lorafleet::v1::RendezvousResponse* response);

}  // namespace lf
