// load_client_security (see client_security.h).
#include "worker/rpc/client_security.h"

#include <stdexcept>

#include "common/security/secret.h"

namespace lf {

ClientSecurity load_client_security(const std::string& token_file, const std::string& tls_ca_file,
                                    const std::string& tls_server_name) {
  ClientSecurity s;
  s.job_token = token_file.empty() ? secret_from_env("LF_JOB_TOKEN")
                                   : read_secret_file(token_file, "--job-token-file");
  if (!tls_ca_file.empty()) s.tls_root_pem = read_pem_file(tls_ca_file, "--tls-ca-file");
  if (!tls_server_name.empty() && tls_ca_file.empty()) {
    throw std::runtime_error("--tls-server-name " + tls_server_name +
                             ": expected together with --tls-ca-file (it only applies to TLS)");
  }
  s.tls_server_name = tls_server_name;
  return s;
}

}  // namespace lf
