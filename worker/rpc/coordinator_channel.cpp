// make_coordinator_channel and friends (see header).
#include "worker/rpc/coordinator_channel.h"

#include "proto/proto_convert.h"

namespace lf {

std::shared_ptr<grpc::Channel> make_coordinator_channel(const std::string& address,
                                                        const ClientSecurity& security,
                                                        bool own_connection) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxPlanMessageBytes);  // plans of large datasets
  // gRPC's default reconnect backoff grows to 120 s; a restarted coordinator should be found
  // within our own retry cadence.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!security.tls_root_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = security.tls_root_pem;  // only this CA, not the system roots
    credentials = grpc::SslCredentials(tls);
    if (!security.tls_server_name.empty()) args.SetSslTargetNameOverride(security.tls_server_name);
  }
  return grpc::CreateCustomChannel(address, credentials, args);
}

void add_job_token(grpc::ClientContext* context, const std::string& job_token) {
  if (!job_token.empty()) context->AddMetadata("authorization", "Bearer " + job_token);
}

std::string describe_status(const grpc::Status& s) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int code = static_cast<int>(s.error_code());
  const std::string name = code >= 0 && code <= 16 ? kNames[code] : std::to_string(code);
  return name + ": " + s.error_message();
}

}  // namespace lf
