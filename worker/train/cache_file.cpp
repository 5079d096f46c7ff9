// Cache file layer (see header).
#include "worker/train/cache_file.h"

#include <ATen/ATen.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "common/io/atomic_file.h"
#include "worker/io/tensor_file.h"

namespace lf {

CacheKeyRendering::CacheKeyRendering(const std::string& kind) : text_(kind + "\n") {}

CacheKeyRendering& CacheKeyRendering::add(const std::string& name, const std::string& value) {
  text_ += name + "=" + std::to_string(value.size()) + ":" + value + "\n";
  return *this;
}

CacheKeyRendering& CacheKeyRendering::add(const std::string& name, std::int64_t value) {
  text_ += name + "=" + std::to_string(value) + "\n";
  return *this;
}

CacheKeyRendering& CacheKeyRendering::add(const std::string& name, bool value) {
  text_ += name + "=" + (value ? "true" : "false") + "\n";
  return *this;
}

std::string cache_file_path(const std::string& dir, const std::string& hex_digest) {
  std::string base = dir;
  if (base.empty()) base = ".";
  if (base.back() != '/') base += '/';
  return base + hex_digest.substr(0, 2) + "/" + hex_digest + ".safetensors";
}

std::uint64_t digest_prefix_u64(const std::string& hex_digest) {
  if (hex_digest.size() < 16) {
    throw std::invalid_argument("digest '" + hex_digest + "' is shorter than 16 hex characters");
  }
  std::uint64_t v = 0;
  for (int i = 0; i < 16; ++i) {
    const char c = hex_digest[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      throw std::invalid_argument("digest '" + hex_digest + "' is not lowercase hex");
    }
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

std::string cache_shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string cache_shape_text(const at::Tensor& t) {
  return cache_shape_text(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
}

std::optional<SafetensorsFile> open_cache_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return std::nullopt;
    throw std::runtime_error(path + ": cannot stat (" + std::strerror(err) + ")");
  }
  return SafetensorsFile::open(path, /*use_mmap=*/false);
}

namespace {

// The first line where two renderings differ, for a readable stale reason.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t a = 0, b = 0;
  while (a < got.size() || b < want.size()) {
    const size_t ea = std::min(got.find('\n', a), got.size());
    const size_t eb = std::min(want.find('\n', b), want.size());
    const std::string la = got.substr(a, ea - a), lb = want.substr(b, eb - b);
    if (la != lb) return "has '" + la + "' where '" + lb + "' was expected";
    a = ea + 1;
    b = eb + 1;
  }
  return "differs";
}

}  // namespace

CacheFileCheck check_cache_metadata(const SafetensorsFile& file, const std::string& format,
                                    const std::string& key_rendering) {
  CacheFileCheck out;
  const auto& md = file.metadata();
  const auto f = md.find(kCacheFormatMetadataKey);
  if (f == md.end()) {
    out.stale = true;
    out.reason =
        "no '" + std::string(kCacheFormatMetadataKey) + "' metadata (expected '" + format + "')";
    return out;
  }
  if (f->second != format) {
    out.stale = true;
    out.reason = "cache format '" + f->second + "', expected '" + format + "'";
    return out;
  }
  const auto k = md.find(kCacheKeyMetadataKey);
  if (k == md.end()) {
    out.stale = true;
    out.reason = "no '" + std::string(kCacheKeyMetadataKey) + "' metadata";
    return out;
  }
  if (k->second != key_rendering) {
    out.stale = true;
    out.reason = "written for another key: the key " + first_difference(k->second, key_rendering);
  }
  return out;
}

at::Tensor cache_tensor(const SafetensorsFile& file, const TensorInfo& info) {
  at::ScalarType type;
  if (info.dtype == DType::F32) {
    type = at::kFloat;
  } else if (info.dtype == DType::U8) {
    type = at::kByte;
  } else {
    throw std::runtime_error(file.path() + ": tensor '" + info.name + "' has dtype " +
                             dtype_name(info.dtype) + ", expected F32 or U8");
  }
  at::Tensor t = at::empty(info.shape, at::TensorOptions().dtype(type));
  // Copy out: the data may be unaligned inside the file image.
  if (info.nbytes() > 0) std::memcpy(t.data_ptr(), file.data(info), info.nbytes());
  return t;
}

void write_cache_file(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::string& format, const std::string& key_rendering) {
  const std::string dir = parent_directory(path);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create cache folder (" + ec.message() + ")");

  const std::vector<std::uint8_t> bytes = serialize_safetensors(
      tensors, {{kCacheFormatMetadataKey, format}, {kCacheKeyMetadataKey, key_rendering}});
  static std::atomic<std::uint64_t> counter{0};
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "host");
  const std::string tmp = path + "." + host + "." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1));
  write_file_atomic(tmp, bytes.data(), bytes.size());
  try {
    rename_atomic(tmp, path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

std::optional<SafetensorsFile> open_current_cache_file(
    const std::string& path, const std::string& format, const std::string& key_rendering,
    const std::function<std::runtime_error(const std::string&)>& corrupt,
    std::string* stale_reason) {
  std::optional<SafetensorsFile> file;
  try {
    file = open_cache_file(path);
  } catch (const std::exception& e) {
    throw corrupt(e.what());
  }
  if (!file) return std::nullopt;
  const CacheFileCheck check = check_cache_metadata(*file, format, key_rendering);
  if (check.stale) {
    if (stale_reason) *stale_reason = path + ": " + check.reason;
    return std::nullopt;
  }
  return file;
}

}  // namespace lf
