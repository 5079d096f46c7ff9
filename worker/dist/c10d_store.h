// A c10d Store (torch/csrc/distributed/c10d/Store.hpp) over a KeyValueRendezvous, so that
// ProcessGroupGloo rendezvouses through the coordinator's authenticated store
// (worker/rpc/coordinator_rendezvous.h) instead of a TCPStore that one rank hosts.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include "common/rendezvous/key_value_rendezvous.h"

namespace lf {

// get() and wait() wait up to the store's timeout (c10d semantics; a wait given kNoTimeout too,
// never forever) and throw
// c10::DistStoreError naming the missing key(s) when it passes; errors of `store` (e.g. the
// coordinator's GroupSupersededError) pass through unchanged. clone() shares `store`.
c10::intrusive_ptr<c10d::Store> make_c10d_store(std::shared_ptr<KeyValueRendezvous> store,
                                                std::chrono::milliseconds timeout);

}  // namespace lf
