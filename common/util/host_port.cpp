// split_host_port (see header).
#include "common/util/host_port.h"

namespace lf {

HostPort split_host_port(const std::string& address) {
  HostPort out;
  const std::size_t colon = address.rfind(':');
  out.host = colon == std::string::npos ? address : address.substr(0, colon);
  if (colon != std::string::npos) out.port = address.substr(colon + 1);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  return out;
}

}  // namespace lf
