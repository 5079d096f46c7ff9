#include "worker/tensorboard/summary_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "common/io/atomic_file.h"
#include "tensorboard/event.pb.h"
#include "worker/tensorboard/record_file.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

constexpr const char* kFilePrefix = "events.out.tfevents.";

double unix_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

bool is_event_file(const fs::path& p) {
  return p.filename().string().rfind(kFilePrefix, 0) == 0 && fs::is_regular_file(p);
}

// The <unix seconds> field of an event file's name (0 when it is not a number).
long long name_seconds(const fs::path& p) {
  const std::string rest = p.filename().string().substr(std::strlen(kFilePrefix));
  try {
    return std::stoll(rest.substr(0, rest.find('.')));
  } catch (const std::exception&) {
    return 0;
  }
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

tensorboard::Event summary_event(std::int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(unix_seconds());
  event.set_step(step);
  return event;
}

}  // namespace

SummaryWriter::SummaryWriter(const std::string& log_dir) {
  std::error_code ec;
  fs::create_directories(log_dir, ec);
  if (ec)
    throw std::runtime_error("cannot create TensorBoard log dir " + log_dir + ": " + ec.message());
  long long seconds = static_cast<long long>(unix_seconds());
  for (const auto& entry : fs::directory_iterator(log_dir)) {
    if (is_event_file(entry.path())) seconds = std::max(seconds, name_seconds(entry.path()) + 1);
  }
  path_ = (fs::path(log_dir) / (kFilePrefix + std::to_string(seconds) + "." + host_name() + "." +
                                std::to_string(getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) {
    throw std::runtime_error("cannot create TensorBoard event file " + path_ + ": " +
                             std::strerror(errno));
  }
  tensorboard::Event version = summary_event(0);
  version.set_file_version("brain.Event:2");
  write_event(version.SerializeAsString());
  flush();
}

SummaryWriter::~SummaryWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void SummaryWriter::write_event(const std::string& serialized_event) {
  const std::string record = frame_record(serialized_event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    throw std::runtime_error("cannot write TensorBoard event file " + path_ + ": " +
                             std::strerror(errno));
  }
}

void SummaryWriter::add_scalar(const std::string& tag, double value, std::int64_t global_step) {
  tensorboard::Event event = summary_event(global_step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  write_event(event.SerializeAsString());
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text,
                             std::int64_t global_step) {
  tensorboard::Event event = summary_event(global_step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  auto* tensor = v->mutable_tensor();
  tensor->set_dtype(tensorboard::DT_STRING);
  tensor->mutable_tensor_shape()->add_dim()->set_size(1);
  tensor->add_string_val(text);
  write_event(event.SerializeAsString());
}

void SummaryWriter::add_image_png(const std::string& tag, const std::string& png, int height,
                                  int width, int channels, std::int64_t global_step) {
  tensorboard::Event event = summary_event(global_step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  auto* image = v->mutable_image();
  image->set_height(height);
  image->set_width(width);
  image->set_colorspace(channels);
  image->set_encoded_image_string(png);
  write_event(event.SerializeAsString());
}

void SummaryWriter::flush() {
  if (std::fflush(file_) != 0) {
    throw std::runtime_error("cannot write TensorBoard event file " + path_ + ": " +
                             std::strerror(errno));
  }
}

std::int64_t drop_events_after(const std::string& log_dir, std::int64_t last_step) {
  if (!fs::is_directory(log_dir)) return 0;
  std::int64_t dropped = 0;
  for (const auto& entry : fs::directory_iterator(log_dir)) {
    if (!is_event_file(entry.path())) continue;
    const std::string path = entry.path().string();
    const RecordFileContents contents = read_record_file(path);
    std::string kept;
    std::int64_t dropped_here = 0;
    for (const std::string& record : contents.records) {
      tensorboard::Event event;
      if (!event.ParseFromString(record)) {
        throw std::runtime_error(path + ": a record is not a TensorBoard Event");
      }
      if (event.has_summary() && event.step() > last_step) {
        ++dropped_here;
      } else {
        kept += frame_record(record);
      }
    }
    if (dropped_here > 0 || contents.torn_tail) write_file_atomic(path, kept);
    dropped += dropped_here;
  }
  return dropped;
}

}  // namespace lf
