// CoordinatorEndpoint: forwarding, and the two byte-serving handlers installed with
// MarkMethodStreamed (as the generated WithStreamedUnaryMethod_* classes do, with a
// grpc::ByteBuffer answer instead of the message type).
#include "coordinator/coordinator_endpoint.h"

#include <memory>
#include <string>

namespace lf {
namespace pb = lorafleet::v1;

namespace {
// The methods' indices in lorafleet.v1.Coordinator (proto/lorafleet/v1/coordinator.proto).
constexpr int kGetDatasetMethod = 1;
constexpr int kGetEpochPlanMethod = 2;
}  // namespace

CoordinatorEndpoint::CoordinatorEndpoint(CoordinatorService& service) : service_(service) {
  MarkMethodStreamed(
      kGetDatasetMethod,
      new grpc::internal::StreamedUnaryHandler<pb::GetDatasetRequest, grpc::ByteBuffer>(
          [this](grpc::ServerContext* context, DatasetStream* stream) {
            return serve_dataset(context, stream);
          }));
  MarkMethodStreamed(
      kGetEpochPlanMethod,
      new grpc::internal::StreamedUnaryHandler<pb::GetEpochPlanRequest, grpc::ByteBuffer>(
          [this](grpc::ServerContext* context, PlanStream* stream) {
            return serve_plan(context, stream);
          }));
}

grpc::Status CoordinatorEndpoint::Register(grpc::ServerContext* context,
                                           const pb::RegisterRequest* request,
                                           pb::RegisterResponse* response) {
  return service_.Register(context, request, response);
}

grpc::Status CoordinatorEndpoint::ReportProgress(grpc::ServerContext* context,
                                                 const pb::ProgressReport* request,
                                                 pb::ProgressAck* response) {
  return service_.ReportProgress(context, request, response);
}

grpc::Status CoordinatorEndpoint::CommitCheckpoint(grpc::ServerContext* context,
                                                   const pb::CheckpointReport* request,
                                                   pb::CheckpointAck* response) {
  return service_.CommitCheckpoint(context, request, response);
}

grpc::Status CoordinatorEndpoint::Finish(grpc::ServerContext* context,
                                         const pb::FinishRequest* request,
                                         pb::FinishAck* response) {
  return service_.Finish(context, request, response);
}

grpc::Status CoordinatorEndpoint::Rendezvous(grpc::ServerContext* context,
                                             const pb::RendezvousRequest* request,
                                             pb::RendezvousResponse* response) {
  return service_.Rendezvous(context, request, response);
}

grpc::Status CoordinatorEndpoint::serve_dataset(grpc::ServerContext* context,
                                                DatasetStream* stream) {
  pb::GetDatasetRequest request;
  if (!stream->Read(&request)) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "GetDataset: the request does not parse"};
  }
  const pb::DatasetManifest* manifest = nullptr;
  if (grpc::Status st = service_.dataset_manifest(context, &manifest); !st.ok()) return st;
  std::call_once(manifest_once_,
                 [&] { manifest_bytes_ = grpc::Slice(manifest->SerializeAsString()); });
  stream->Write(grpc::ByteBuffer(&manifest_bytes_, 1));
  return grpc::Status::OK;
}

grpc::Status CoordinatorEndpoint::serve_plan(grpc::ServerContext* context, PlanStream* stream) {
  pb::GetEpochPlanRequest request;
  if (!stream->Read(&request)) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "GetEpochPlan: the request does not parse"};
  }
  std::shared_ptr<const EpochPlan> plan;
  if (grpc::Status st = service_.find_epoch_plan(context, request, &plan); !st.ok()) return st;
  grpc::Slice bytes;
  if (request.world_size() > 0) {
    // A full plan of another world size, built for this call: nothing to share.
    bytes = epoch_plan_bytes(*plan);
    std::lock_guard<std::mutex> lock(mutex_);
    ++uncached_plans_;
  } else {
    bytes = plans_.bytes(plan);
  }
  stream->Write(grpc::ByteBuffer(&bytes, 1));
  return grpc::Status::OK;
}

std::int64_t CoordinatorEndpoint::plan_serializations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.serializations() + uncached_plans_;
}

}  // namespace lf
