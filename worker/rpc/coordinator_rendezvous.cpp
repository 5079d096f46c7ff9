// Rendezvous store operations as coordinator calls (see header).
#include "worker/rpc/coordinator_rendezvous.h"

#include <algorithm>
#include <utility>

namespace lf {

using Kind = RendezvousOp::Kind;

CoordinatorRendezvous::CoordinatorRendezvous(CoordinatorClient& client, int rank,
                                             std::chrono::milliseconds budget)
    : client_(client), rank_(rank), budget_(budget) {}

RendezvousResult CoordinatorRendezvous::call(RendezvousOp op) {
  return client_.rendezvous(rank_, op, budget_);
}

RendezvousResult CoordinatorRendezvous::poll(RendezvousOp op, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    op.wait = std::max(std::chrono::milliseconds(0), left);
    RendezvousResult r = call(op);
    if (r.found || left <= std::chrono::milliseconds(0)) return r;
  }
}

void CoordinatorRendezvous::set(const std::string& key, const std::string& value) {
  RendezvousOp op;
  op.kind = Kind::kSet;
  op.keys = {key};
  op.value = value;
  call(std::move(op));
}

std::string CoordinatorRendezvous::compare_set(const std::string& key, const std::string& expected,
                                               const std::string& desired) {
  RendezvousOp op;
  op.kind = Kind::kCompareSet;
  op.keys = {key};
  op.expected = expected;
  op.value = desired;
  return call(std::move(op)).value;
}

std::optional<std::string> CoordinatorRendezvous::get(const std::string& key,
                                                      std::chrono::milliseconds timeout) {
  RendezvousOp op;
  op.kind = Kind::kGet;
  op.keys = {key};
  RendezvousResult r = poll(std::move(op), timeout);
  if (!r.found) return std::nullopt;
  return std::move(r.value);
}

std::int64_t CoordinatorRendezvous::add(const std::string& key, std::int64_t delta) {
  RendezvousOp op;
  op.kind = Kind::kAdd;
  op.keys = {key};
  op.delta = delta;
  return call(std::move(op)).number;
}

bool CoordinatorRendezvous::remove(const std::string& key) {
  RendezvousOp op;
  op.kind = Kind::kDelete;
  op.keys = {key};
  return call(std::move(op)).found;
}

bool CoordinatorRendezvous::check(const std::vector<std::string>& keys) {
  RendezvousOp op;
  op.kind = Kind::kCheck;
  op.keys = keys;
  return call(std::move(op)).found;
}

std::int64_t CoordinatorRendezvous::size() {
  RendezvousOp op;
  op.kind = Kind::kNumKeys;
  return call(std::move(op)).number;
}

bool CoordinatorRendezvous::wait(const std::vector<std::string>& keys,
                                 std::chrono::milliseconds timeout) {
  RendezvousOp op;
  op.kind = Kind::kWait;
  op.keys = keys;
  return poll(std::move(op), timeout).found;
}

}  // namespace lf
