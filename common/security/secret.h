// Reading secrets (the job token) from a file or an environment variable. The value is never
// part of an error message: errors name only the file or variable and what is wrong with it.
#pragma once

#include <string>

namespace lf {

// The whole file at `path` with surrounding whitespace trimmed. `what` names where the path came
// from ("coordinator.job_token_file", "--job-token-file"). Throws std::runtime_error naming the
// path and `what` when the file cannot be read, is empty after trimming, or holds characters
// outside printable ASCII 0x21..0x7e (the token travels as an HTTP/2 header value).
std::string read_secret_file(const std::string& path, const std::string& what);

// The trimmed value of environment variable `name`; "" when unset or blank. Throws
// std::runtime_error naming the variable when it holds characters outside 0x21..0x7e.
std::string secret_from_env(const char* name);

// The whole file at `path` (certificates, keys), as is. Throws std::runtime_error
// "cannot read <path> (<what>): <reason>" when it cannot be read or is empty.
std::string read_pem_file(const std::string& path, const std::string& what);

}  // namespace lf
