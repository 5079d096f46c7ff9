// Job-token authentication of the control plane. Every RPC must carry the job's token as gRPC
// metadata "authorization: Bearer <token>"; JobTokenAuth::check is the first line of every
// CoordinatorService handler. resolve_job_token decides, once at start-up, which token applies.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

namespace lf {

// True when `listen_address` ("host:port", "[v6]:port") names a loopback host: 127.0.0.0/8,
// ::1 or localhost. Anything else (0.0.0.0, a pod IP, a hostname) is cluster mode.
bool is_loopback_listen_address(const std::string& listen_address);

// The token the coordinator enforces: the trimmed content of `token_file` when non-empty (`what`
// names the key or flag that gave it), else the environment variable LF_JOB_TOKEN. Returns ""
// (every call accepted) only on a loopback address. Throws std::runtime_error when the file is
// unreadable or empty (naming it), or in cluster mode without a token (naming the address and
// both ways to give one).
std::string resolve_job_token(const std::string& listen_address, const std::string& token_file,
                              const std::string& what);

class JobTokenAuth {
 public:
  // An empty token disables the check (loopback without a token). Only a digest is kept.
  explicit JobTokenAuth(const std::string& token);

  bool enabled() const { return enabled_; }

  // OK when the call's metadata holds "authorization: Bearer <token>" (scheme case-insensitive)
  // or the check is disabled. Otherwise UNAUTHENTICATED "missing or wrong job token ...", and a
  // WARN naming the peer and `rpc`; neither ever contains the token or any part of what was
  // sent. The comparison takes the same time wherever the tokens differ. Thread-safe.
  grpc::Status check(const grpc::ServerContext& context, const char* rpc) const;
  // Whether `presented` is the token (always true when the check is disabled). Constant time
  // as check(); for the status page's HTTP requests. Thread-safe.
  bool accepts(const std::string& presented) const;

 private:
  bool enabled_ = false;
  std::string digest_;  // SHA-256 (hex) of the token
};

}  // namespace lf
