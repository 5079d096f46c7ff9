// ControlService (see header).
#include "coordinator/control_service.h"

#include "common/util/log.h"

namespace lf {

namespace pb = lorafleet::v1;

namespace {

// "lorafleet-ctl on host-a (ipv4:10.0.0.5:41234)": who asked, for the logs and the status.
std::string requester(const grpc::ServerContext& context, const pb::ControlRequest& request) {
  const std::string peer = context.peer();
  if (request.requested_by().empty()) return peer;
  return request.requested_by() + " (" + peer + ")";
}

void answer(const OperatorControl::Outcome& o, pb::ControlReply* reply) {
  reply->set_accepted(o.accepted);
  reply->set_detail(o.detail);
}

}  // namespace

ControlService::ControlService(const std::string& job_token, OperatorControl& control,
                               CoordinatorService& service)
    : auth_(job_token), control_(control), service_(service) {}

OperatorControl::Outcome ControlService::act(const std::string& action, const std::string& who) {
  OperatorControl::Outcome o;
  if (action == "stop") {
    o = control_.request_stop(who);
    if (o.accepted) service_.on_stop_requested();
  } else if (action == "cancel") {
    o = control_.request_cancel(who);
    if (o.accepted) service_.on_cancel_requested();
  } else if (action == "sample-now") {
    o = control_.request_sample_now(who);
  } else {
    return {false, "unknown action \"" + action + "\": expected stop, cancel or sample-now"};
  }
  if (o.accepted) {
    LF_WARN(action << " asked by " << who << ": " << o.detail);
  } else {
    LF_INFO(action << " asked by " << who << " refused: " << o.detail);
  }
  return o;
}

grpc::Status ControlService::GetStatus(grpc::ServerContext* context, const pb::GetStatusRequest*,
                                       pb::JobStatus* response) {
  if (grpc::Status st = auth_.check(*context, "GetStatus"); !st.ok()) return st;
  service_.fill_status(response);
  return grpc::Status::OK;
}

grpc::Status ControlService::Stop(grpc::ServerContext* context, const pb::ControlRequest* request,
                                  pb::ControlReply* response) {
  if (grpc::Status st = auth_.check(*context, "Stop"); !st.ok()) return st;
  answer(act("stop", requester(*context, *request)), response);
  return grpc::Status::OK;
}

grpc::Status ControlService::Cancel(grpc::ServerContext* context, const pb::ControlRequest* request,
                                    pb::ControlReply* response) {
  if (grpc::Status st = auth_.check(*context, "Cancel"); !st.ok()) return st;
  answer(act("cancel", requester(*context, *request)), response);
  return grpc::Status::OK;
}

grpc::Status ControlService::SampleNow(grpc::ServerContext* context,
                                       const pb::ControlRequest* request,
                                       pb::ControlReply* response) {
  if (grpc::Status st = auth_.check(*context, "SampleNow"); !st.ok()) return st;
  answer(act("sample-now", requester(*context, *request)), response);
  return grpc::Status::OK;
}

}  // namespace lf
