// SHA-256 digests as lowercase hex, via OpenSSL EVP. Used for kohya's sshs_model_hash
// (hash of a safetensors data section), dataset cache keys and checkpoint manifests.
#pragma once

#include <cstddef>
#include <string>

namespace lf {

// 64 lowercase hex characters of SHA-256 over n bytes at data.
// Throws std::runtime_error if OpenSSL fails (it does not in practice).
std::string sha256_hex(const void* data, size_t n);
std::string sha256_hex(const std::string& bytes);

// SHA-256 of a whole file, read in 1 MiB chunks. Throws std::runtime_error
// "<path>: cannot open (...)" / "<path>: read failed (...)".
std::string sha256_file_hex(const std::string& path);

}  // namespace lf
