// Crash-safe file replacement: write a sibling temp file, fsync it, rename it over the target
// and fsync the directory, so readers (and a restarted job) see either the old or the new file,
// never a torn one. Used for checkpoints, LoRA outputs and state files.
#pragma once

#include <cstddef>
#include <string>

#include "common/io/sha256.h"

namespace lf {

// The same temp-file + fsync + rename + directory-fsync, fed in pieces, so a file made of many
// buffers (a safetensors header and its tensors) is written without first being assembled in
// memory. Every byte is hashed as it is written; commit() returns the size and SHA-256, which
// is what a checkpoint's COMMITTED manifest records, so nothing is read back to hash it.
// Errors are std::runtime_error naming the failing path and strerror(errno), as for
// write_file_atomic. Destroying a writer that was not committed removes its temp file and
// leaves `path` as it was. One writer per path at a time in a process (the temp name is
// "<path>.tmp.<pid>").
class AtomicFileWriter {
 public:
  // kNone: for callers that hash the same bytes themselves (on another thread); commit() then
  // returns an empty sha256.
  enum class Hashing { kSha256, kNone };
  explicit AtomicFileWriter(std::string path, Hashing hashing = Hashing::kSha256);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends n bytes (retrying on EINTR and short writes).
  void write(const void* data, size_t n);
  // fsync, close, rename over `path`, fsync the directory. Call once.
  FileDigest commit();

 private:
  void abandon() noexcept;

  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  Hashing hashing_;
  Sha256 hash_;
  std::uint64_t size_ = 0;
};

// Writes n bytes to "<path>.tmp.<pid>", fsyncs it, renames it over `path` and fsyncs the parent
// directory. If creating, writing, syncing or renaming fails, the temp file is removed, `path`
// keeps its old content, and a std::runtime_error naming the failing path and strerror(errno)
// is thrown. (If only the final directory fsync fails, the new content is already in place but
// may not survive a crash; that is thrown too.) Writes retry on EINTR and short writes. The new
// file gets mode 0644 (subject to the umask). The temp name is per process, so one process must
// not write the same path from two threads at once.
FileDigest write_file_atomic(const std::string& path, const void* data, size_t n);
FileDigest write_file_atomic(const std::string& path, const std::string& content);

// fsync(2) on a directory so a rename/create inside it survives a crash.
// Throws std::runtime_error naming `dir` on failure.
void fsync_directory(const std::string& dir);

// rename(2) `from` onto `to` (same filesystem), then fsyncs the directory of `to`.
// Throws std::runtime_error naming both paths on failure.
void rename_atomic(const std::string& from, const std::string& to);

// The directory part of `path` ("." when it has none); "/" for "/x".
std::string parent_directory(const std::string& path);

}  // namespace lf
