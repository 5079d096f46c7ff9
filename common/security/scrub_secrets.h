// Secrets kept out of logs: a config text (the job YAML, a kohya .toml) with the values of its
// secret-looking keys replaced, before it is written where others read it (TensorBoard's
// config text, kohya --log_config).
#pragma once

#include <string>

namespace lf {

// `text` with the value of every "key: value" / "key = value" line whose key names a secret
// (contains token, secret, password, passwd, api_key, apikey or credential, case-insensitive;
// keys ending in _file or _path name files, and tokenizer keys, are kept) replaced by
// "<scrubbed>". Other lines,
// comments and indentation are unchanged.
std::string scrub_secrets(const std::string& text);

}  // namespace lf
