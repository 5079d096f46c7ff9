// ControlService: the lorafleet.v1.JobControl gRPC service (proto/lorafleet/v1/control.proto):
// `lorafleet-ctl status | stop | cancel | sample-now` and the status page's forms. It checks the
// job token like every Coordinator RPC, records the request in OperatorControl and answers;
// the workers learn of it from their heartbeats. Handlers never block.
#pragma once

#include <string>

#include "coordinator/auth.h"
#include "coordinator/operator_control.h"
#include "coordinator/service.h"
#include "lorafleet/v1/control.grpc.pb.h"

namespace lf {

class ControlService final : public lorafleet::v1::JobControl::Service {
 public:
  // `job_token` as ServiceOptions::job_token ("" accepts every call). `control` and `service`
  // must outlive this object.
  ControlService(const std::string& job_token, OperatorControl& control,
                 CoordinatorService& service);

  grpc::Status GetStatus(grpc::ServerContext* context,
                         const lorafleet::v1::GetStatusRequest* request,
                         lorafleet::v1::JobStatus* response) override;
  grpc::Status Stop(grpc::ServerContext* context, const lorafleet::v1::ControlRequest* request,
                    lorafleet::v1::ControlReply* response) override;
  grpc::Status Cancel(grpc::ServerContext* context, const lorafleet::v1::ControlRequest* request,
                      lorafleet::v1::ControlReply* response) override;
  grpc::Status SampleNow(grpc::ServerContext* context, const lorafleet::v1::ControlRequest* request,
                         lorafleet::v1::ControlReply* response) override;

  // The same actions without gRPC, for the status page's forms and Ctrl-C on the coordinator:
  // `action` is "stop", "cancel" or "sample-now"; `who` names the requester in the logs.
  // Returns the outcome (an unknown action is refused naming the three).
  OperatorControl::Outcome act(const std::string& action, const std::string& who);

 private:
  JobTokenAuth auth_;
  OperatorControl& control_;
  CoordinatorService& service_;
};

}  // namespace lf
