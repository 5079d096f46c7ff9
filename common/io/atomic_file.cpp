// POSIX implementation of the temp-file + fsync + rename + directory-fsync pattern
// (see atomic_file.h). Only <fcntl.h>/<unistd.h>; errors carry the path and strerror.
#include "common/io/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lf {
namespace {

std::runtime_error sys_error(const std::string& what, const std::string& path, int err) {
  return std::runtime_error(path + ": " + what + " failed (" + std::strerror(err) + ")");
}

// Writes all n bytes, retrying on EINTR and short writes; returns 0 or an errno value.
int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

int fsync_retry(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

}  // namespace

std::string parent_directory(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw sys_error("open directory", dir, errno);
  int err = fsync_retry(fd);
  ::close(fd);
  // Some filesystems do not support fsync on directories; that is not a data-loss error.
  if (err != 0 && err != EINVAL && err != ENOTSUP) throw sys_error("fsync directory", dir, err);
}

void rename_atomic(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    int err = errno;
    throw std::runtime_error(from + " -> " + to + ": rename failed (" + std::strerror(err) + ")");
  }
  fsync_directory(parent_directory(to));
}

AtomicFileWriter::AtomicFileWriter(std::string path, Hashing hashing)
    : path_(std::move(path)),
      tmp_(path_ + ".tmp." + std::to_string(::getpid())),
      hashing_(hashing) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw sys_error("create temp file", tmp_, errno);
}

AtomicFileWriter::~AtomicFileWriter() { abandon(); }

void AtomicFileWriter::abandon() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t n) {
  if (fd_ < 0) throw std::logic_error(path_ + ": write after commit");
  if (int err = write_all(fd_, static_cast<const char*>(data), n)) {
    abandon();
    throw sys_error("write", tmp_, err);
  }
  if (hashing_ == Hashing::kSha256) hash_.update(data, n);
  size_ += n;
}

FileDigest AtomicFileWriter::commit() {
  if (fd_ < 0) throw std::logic_error(path_ + ": commit called twice");
  int err = fsync_retry(fd_);
  const char* step = "fsync";
  if (::close(fd_) != 0 && err == 0) {
    err = errno;
    step = "close";
  }
  fd_ = -1;
  if (err != 0) {
    ::unlink(tmp_.c_str());
    throw sys_error(step, tmp_, err);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    err = errno;
    ::unlink(tmp_.c_str());
    throw std::runtime_error(path_ + ": rename from " + tmp_ + " failed (" + std::strerror(err) +
                             ")");
  }
  fsync_directory(parent_directory(path_));
  return FileDigest{size_, hashing_ == Hashing::kSha256 ? hash_.hex_digest() : std::string()};
}

FileDigest write_file_atomic(const std::string& path, const void* data, size_t n) {
  AtomicFileWriter out(path);
  out.write(data, n);
  return out.commit();
}

FileDigest write_file_atomic(const std::string& path, const std::string& content) {
  return write_file_atomic(path, content.data(), content.size());
}

}  // namespace lf
