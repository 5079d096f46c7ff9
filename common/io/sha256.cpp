// OpenSSL EVP SHA-256 (see sha256.h). One EVP_MD_CTX per call; no global state.
#include "common/io/sha256.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

namespace lf {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

MdCtx new_ctx() {
  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("sha256: OpenSSL EVP_DigestInit_ex failed");
  }
  return ctx;
}

std::string finish_hex(EVP_MD_CTX* ctx) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx, md, &len) != 1) {
    throw std::runtime_error("sha256: OpenSSL EVP_DigestFinal_ex failed");
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

}  // namespace

std::string sha256_hex(const void* data, size_t n) {
  MdCtx ctx = new_ctx();
  if (n > 0 && EVP_DigestUpdate(ctx.get(), data, n) != 1) {
    throw std::runtime_error("sha256: OpenSSL EVP_DigestUpdate failed");
  }
  return finish_hex(ctx.get());
}

std::string sha256_hex(const std::string& bytes) { return sha256_hex(bytes.data(), bytes.size()); }

std::string sha256_file_hex(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    throw std::runtime_error(path + ": cannot open (" + std::strerror(err) + ")");
  }
  MdCtx ctx = new_ctx();
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw std::runtime_error(path + ": read failed (" + std::strerror(err) + ")");
    }
    if (r == 0) break;
    if (EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(r)) != 1) {
      ::close(fd);
      throw std::runtime_error("sha256: OpenSSL EVP_DigestUpdate failed");
    }
  }
  ::close(fd);
  return finish_hex(ctx.get());
}

struct Sha256::Ctx {
  MdCtx md = new_ctx();
  bool finished = false;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, size_t n) {
  if (ctx_->finished) throw std::logic_error("sha256: update() after hex_digest()");
  if (n > 0 && EVP_DigestUpdate(ctx_->md.get(), data, n) != 1) {
    throw std::runtime_error("sha256: OpenSSL EVP_DigestUpdate failed");
  }
}

std::string Sha256::hex_digest() {
  if (ctx_->finished) throw std::logic_error("sha256: hex_digest() called twice");
  ctx_->finished = true;
  return finish_hex(ctx_->md.get());
}

}  // namespace lf
