// The gRPC channel to a coordinator, as every client of it opens one (the workers'
// CoordinatorClient, lorafleet-ctl): TLS trusting only the given CA when there is one, a large
// receive limit for epoch plans, and a reconnect backoff short enough to find a restarted
// coordinator within seconds. gRPC headers: include only from translation units without
// LibTorch (the torch wheel bundles its own protobuf).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "worker/rpc/client_security.h"

namespace lf {

// A channel to `address` ("host:port"); does not connect yet. gRPC lets channels of one process
// with the same arguments share a TCP connection; own_connection gives this one its own (a
// subchannel pool of its own), as a worker process has: for load tests that simulate many
// workers in one process (bench/coordinator_load).
std::shared_ptr<grpc::Channel> make_coordinator_channel(const std::string& address,
                                                        const ClientSecurity& security,
                                                        bool own_connection = false);

// Adds what every RPC must carry: "authorization: Bearer <job_token>" unless the token is "".
void add_job_token(grpc::ClientContext* context, const std::string& job_token);

// "UNAVAILABLE: failed to connect ..." : the status code's name and message.
std::string describe_status(const grpc::Status& status);

}  // namespace lf
