// Crash-safe file replacement: write a sibling temp file, fsync it, rename it over the target
// and fsync the directory, so readers (and a restarted job) see either the old or the new file,
// never a torn one. Used for checkpoints, LoRA outputs and state files.
#pragma once

#include <cstddef>
#include <string>

namespace lf {

// Writes n bytes to "<path>.tmp.<pid>", fsyncs it, renames it over `path` and fsyncs the parent
// directory. If creating, writing, syncing or renaming fails, the temp file is removed, `path`
// keeps its old content, and a std::runtime_error naming the failing path and strerror(errno)
// is thrown. (If only the final directory fsync fails, the new content is already in place but
// may not survive a crash; that is thrown too.) Writes retry on EINTR and short writes. The new
// file gets mode 0644 (subject to the umask). The temp name is per process, so one process must
// not write the same path from two threads at once.
void write_file_atomic(const std::string& path, const void* data, size_t n);
void write_file_atomic(const std::string& path, const std::string& content);

// fsync(2) on a directory so a rename/create inside it survives a crash.
// Throws std::runtime_error naming `dir` on failure.
void fsync_directory(const std::string& dir);

// rename(2) `from` onto `to` (same filesystem), then fsyncs the directory of `to`.
// Throws std::runtime_error naming both paths on failure.
void rename_atomic(const std::string& from, const std::string& to);

// The directory part of `path` ("." when it has none); "/" for "/x".
std::string parent_directory(const std::string& path);

}  // namespace lf
