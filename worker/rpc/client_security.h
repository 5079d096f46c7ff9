// How a worker authenticates to the coordinator and checks who it talks to: the job token sent
// with every RPC and, optionally, the CA that signed the coordinator's TLS certificate.
#pragma once

#include <string>

namespace lf {

struct ClientSecurity {
  // Sent as "authorization: Bearer <job_token>" with every RPC; "" sends none.
  std::string job_token;
  // PEM root certificates: non-empty switches the channel to TLS trusting only these roots.
  std::string tls_root_pem;
  // The name the coordinator's certificate must carry when it differs from the dialled host
  // ("" = the dialled host). Only with TLS.
  std::string tls_server_name;
};

// From the worker's flags: the token from `token_file` (--job-token-file) when non-empty, else
// LF_JOB_TOKEN; the CA from `tls_ca_file` (--tls-ca-file) when non-empty. Throws
// std::runtime_error naming the file when it cannot be read or is empty, or the flag when
// --tls-server-name is given without --tls-ca-file.
ClientSecurity load_client_security(const std::string& token_file, const std::string& tls_ca_file,
                                    const std::string& tls_server_name);

}  // namespace lf
