// SHA-256 digests as lowercase hex, via OpenSSL EVP. Used for kohya's sshs_model_hash
// (hash of a safetensors data section), dataset cache keys and checkpoint manifests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace lf {

// 64 lowercase hex characters of SHA-256 over n bytes at data.
// Throws std::runtime_error if OpenSSL fails (it does not in practice).
std::string sha256_hex(const void* data, size_t n);
std::string sha256_hex(const std::string& bytes);

// SHA-256 of a whole file, read in 1 MiB chunks. Throws std::runtime_error
// "<path>: cannot open (...)" / "<path>: read failed (...)".
std::string sha256_file_hex(const std::string& path);

// Incremental SHA-256: update() with consecutive pieces, then hex_digest() once. Gives the same
// digest as sha256_hex over the concatenation. Throws std::runtime_error if OpenSSL fails, or
// std::logic_error on update()/hex_digest() after hex_digest().
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(const void* data, size_t n);
  std::string hex_digest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// What a writer knows of a file it has just written: its size in bytes and the SHA-256 of its
// content, hashed from the bytes as they were written (see AtomicFileWriter).
struct FileDigest {
  std::uint64_t size = 0;
  std::string sha256;  // 64 lowercase hex characters
};

}  // namespace lf
