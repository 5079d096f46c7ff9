// "host:port" addresses as lorafleet's flags and config keys spell them ("[::1]:50051" for IPv6).
#pragma once

#include <string>

namespace lf {

struct HostPort {
  std::string host;  // without IPv6 brackets
  std::string port;  // "" when the address has no ':'
};

// Splits at the last ':' and strips IPv6 brackets. Never throws; callers check what they need.
HostPort split_host_port(const std::string& address);

}  // namespace lf
