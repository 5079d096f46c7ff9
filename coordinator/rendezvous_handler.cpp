// Rendezvous store requests (see header).
#include "coordinator/rendezvous_handler.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace lf {
namespace pb = lorafleet::v1;

namespace {

std::chrono::milliseconds hold_of(const pb::RendezvousRequest& r) {
  return std::clamp(std::chrono::milliseconds(r.wait_ms()), std::chrono::milliseconds(0),
                    kMaxRendezvousHold);
}

grpc::Status run(KeyValueStore& store, const pb::RendezvousRequest& r,
                 pb::RendezvousResponse* out) {
  const std::vector<std::string> keys(r.keys().begin(), r.keys().end());
  const bool multi = r.op() == pb::RendezvousRequest::CHECK ||
                     r.op() == pb::RendezvousRequest::WAIT ||
                     r.op() == pb::RendezvousRequest::NUM_KEYS;
  if (!multi && keys.size() != 1) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "Rendezvous " + pb::RendezvousRequest::Op_Name(r.op()) + " takes one key, got " +
                std::to_string(keys.size())};
  }
  switch (r.op()) {
    case pb::RendezvousRequest::SET: store.set(keys[0], r.value()); return grpc::Status::OK;
    case pb::RendezvousRequest::GET:
      if (auto v = store.get(keys[0], hold_of(r))) {
        out->set_found(true);
        out->set_value(std::move(*v));
      }
      return grpc::Status::OK;
    case pb::RendezvousRequest::ADD:
      out->set_number(store.add(keys[0], r.delta()));
      return grpc::Status::OK;
    case pb::RendezvousRequest::COMPARE_SET:
      out->set_value(store.compare_set(keys[0], r.expected(), r.value()));
      return grpc::Status::OK;
    case pb::RendezvousRequest::DELETE:
      out->set_found(store.remove(keys[0]));
      return grpc::Status::OK;
    case pb::RendezvousRequest::CHECK: out->set_found(store.check(keys)); return grpc::Status::OK;
    case pb::RendezvousRequest::NUM_KEYS: out->set_number(store.size()); return grpc::Status::OK;
    case pb::RendezvousRequest::WAIT:
      out->set_found(store.wait(keys, hold_of(r)));
      return grpc::Status::OK;
    default:
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "Rendezvous: unknown op " + std::to_string(static_cast<int>(r.op()))};
  }
}

}  // namespace

grpc::Status serve_rendezvous(KeyValueStore& store, const pb::RendezvousRequest& request,
                              pb::RendezvousResponse* response) {
  try {
    return run(store, request, response);
  } catch (const std::length_error& e) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED, std::string("Rendezvous: ") + e.what()};
  } catch (const std::invalid_argument& e) {
    return {grpc::StatusCode::INVALID_ARGUMENT, std::string("Rendezvous: ") + e.what()};
  }
}

}  // namespace lf
