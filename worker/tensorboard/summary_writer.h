// TensorBoard event files, written with the API shape of torch.utils.tensorboard.SummaryWriter
// (add_scalar, add_text, add_image, flush): scalars as Summary.Value.simple_value, text as the
// text plugin's DT_STRING tensor, images as PNG-encoded Summary.Image, each record framed as in
// record_file.h. Torch-free: the Protobuf code stays inside this library (the torch wheel
// bundles protobuf headers of its own).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lf {

class SummaryWriter {
 public:
  // Creates `log_dir` with its parents and a new file in it,
  // events.out.tfevents.<unix seconds>.<hostname>.<pid>, whose seconds are later than those of
  // every event file already there (TensorBoard reads a run's files in name order, so a resumed
  // run's file sorts after the earlier ones), and writes the "brain.Event:2" version record.
  // Throws std::runtime_error naming the path when it cannot be created or written.
  explicit SummaryWriter(const std::string& log_dir);
  ~SummaryWriter();  // flushes and closes
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  void add_scalar(const std::string& tag, double value, std::int64_t global_step);
  void add_text(const std::string& tag, const std::string& text, std::int64_t global_step);
  // `png`: a PNG file's bytes, of height x width pixels and `channels` (1, 2, 3 or 4).
  void add_image_png(const std::string& tag, const std::string& png, int height, int width,
                     int channels, std::int64_t global_step);
  // Hands buffered records to the OS (no fsync: losing the last records in a crash is fine,
  // a resumed run rewrites them). Throws std::runtime_error naming the file on a write error.
  void flush();

  const std::string& file_path() const { return path_; }

 private:
  void write_event(const std::string& serialized_event);

  std::string path_;
  std::FILE* file_ = nullptr;
};

// Rewrites (atomically) each event file of `log_dir` that holds summaries of steps after
// `last_step`, or a torn last record, without them, so that a run resumed after `last_step`
// leaves each step once. Returns how many events were dropped; 0 when log_dir does not exist.
// Throws std::runtime_error naming the file when one cannot be read or parsed.
std::int64_t drop_events_after(const std::string& log_dir, std::int64_t last_step);

}  // namespace lf
