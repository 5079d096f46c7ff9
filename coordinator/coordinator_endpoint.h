// CoordinatorEndpoint: the lorafleet.v1.Coordinator service as CoordinatorServer registers it
// with gRPC. Register, ReportProgress, CommitCheckpoint, Finish and Rendezvous go to
// CoordinatorService as they are. GetDataset and GetEpochPlan go through the service's checks (job
// token, registration, epoch) but are answered with message bytes serialized once: the manifest
// once per run, a plan once per plan object (PlanBytesCache). That is gRPC's streamed-unary form of
// a synchronous method writing a grpc::ByteBuffer, which references the bytes instead of converting
// and serializing the message again for every rank; the wire format is unchanged. Measured with
// bench/coordinator_load (bench/README.md): at 512 ranks the start-up burst of 512 manifests
// and plans cost the coordinator ~9 s of CPU, so heartbeats timed out and a 10 s lease expired
// on a live rank.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <mutex>

#include "coordinator/plan_bytes_cache.h"
#include "coordinator/service.h"
#include "lorafleet/v1/coordinator.grpc.pb.h"

namespace lf {

class CoordinatorEndpoint final : public lorafleet::v1::Coordinator::Service {
 public:
  // `service` must outlive the endpoint.
  explicit CoordinatorEndpoint(CoordinatorService& service);

  grpc::Status Register(grpc::ServerContext* context, const lorafleet::v1::RegisterRequest* request,
                        lorafleet::v1::RegisterResponse* response) override;
  grpc::Status ReportProgress(grpc::ServerContext* context,
                              const lorafleet::v1::ProgressReport* request,
                              lorafleet::v1::ProgressAck* response) override;
  grpc::Status CommitCheckpoint(grpc::ServerContext* context,
                                const lorafleet::v1::CheckpointReport* request,
                                lorafleet::v1::CheckpointAck* response) override;
  grpc::Status Finish(grpc::ServerContext* context, const lorafleet::v1::FinishRequest* request,
                      lorafleet::v1::FinishAck* response) override;
  grpc::Status Rendezvous(grpc::ServerContext* context,
                          const lorafleet::v1::RendezvousRequest* request,
                          lorafleet::v1::RendezvousResponse* response) override;

  // Epoch plans converted and serialized so far (the full plans of another world size, asked
  // for by a resume, each count). Thread-safe.
  std::int64_t plan_serializations() const;

 private:
  using DatasetStream =
      grpc::ServerUnaryStreamer<lorafleet::v1::GetDatasetRequest, grpc::ByteBuffer>;
  using PlanStream =
      grpc::ServerUnaryStreamer<lorafleet::v1::GetEpochPlanRequest, grpc::ByteBuffer>;
  grpc::Status serve_dataset(grpc::ServerContext* context, DatasetStream* stream);
  grpc::Status serve_plan(grpc::ServerContext* context, PlanStream* stream);

  CoordinatorService& service_;
  PlanBytesCache plans_;
  std::once_flag manifest_once_;
  grpc::Slice manifest_bytes_;
  mutable std::mutex mutex_;
  std::int64_t uncached_plans_ = 0;  // full plans of another world size
};

}  // namespace lf
