// JobTokenAuth and the cluster-mode token policy (see auth.h). Tokens are compared through their
// SHA-256 digests with a loop that never exits early, so neither the position of the first
// differing byte nor the token's length shows in the response time.
#include "coordinator/auth.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "common/io/sha256.h"
#include "common/security/secret.h"
#include "common/util/host_port.h"
#include "common/util/log.h"

namespace lf {
namespace {

constexpr const char* kTokenEnv = "LF_JOB_TOKEN";

bool equal_constant_time(const std::string& a, const std::string& b) {
  // Both are 64-character digests; the length check never depends on the secret.
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

bool starts_with_bearer(const std::string& value) {
  static const std::string kScheme = "bearer ";
  if (value.size() < kScheme.size()) return false;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) != kScheme[i]) return false;
  }
  return true;
}

}  // namespace

bool is_loopback_listen_address(const std::string& listen_address) {
  std::string host = split_host_port(listen_address).host;
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    static const in6_addr kLoopback = IN6ADDR_LOOPBACK_INIT;
    return std::equal(std::begin(v6.s6_addr), std::end(v6.s6_addr), std::begin(kLoopback.s6_addr));
  }
  return false;
}

std::string resolve_job_token(const std::string& listen_address, const std::string& token_file,
                              const std::string& what) {
  if (!token_file.empty()) return read_secret_file(token_file, what);
  std::string token = secret_from_env(kTokenEnv);
  if (token.empty() && !is_loopback_listen_address(listen_address)) {
    throw std::runtime_error(
        "refusing to serve the control plane on " + listen_address +
        " (not loopback) without a job token: expected coordinator.job_token_file (or "
        "--job-token-file) naming a file with the token, or the environment variable " +
        kTokenEnv +
        "; generate one with `openssl rand -hex 32` and give the same token to the "
        "workers");
  }
  return token;
}

JobTokenAuth::JobTokenAuth(const std::string& token)
    : enabled_(!token.empty()), digest_(token.empty() ? "" : sha256_hex(token)) {}

grpc::Status JobTokenAuth::check(const grpc::ServerContext& context, const char* rpc) const {
  if (!enabled_) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  bool ok = false;
  if (it != metadata.end()) {
    const std::string value(it->second.data(), it->second.size());
    // The digest of whatever follows the scheme, so a short or long guess takes equal time.
    ok = accepts(starts_with_bearer(value) ? value.substr(7) : std::string());
  }
  if (ok) return grpc::Status::OK;
  LF_WARN("rejected " << rpc << " from " << context.peer() << ": "
                      << (it == metadata.end() ? "no authorization metadata" : "wrong job token"));
  return {grpc::StatusCode::UNAUTHENTICATED,
          "missing or wrong job token (workers and lorafleet-ctl take it from --job-token-file "
          "or LF_JOB_TOKEN)"};
}

bool JobTokenAuth::accepts(const std::string& presented) const {
  if (!enabled_) return true;
  // The digest of whatever was sent, so a short or long guess takes equal time.
  return equal_constant_time(sha256_hex(presented), digest_) && !presented.empty();
}

}  // namespace lf
