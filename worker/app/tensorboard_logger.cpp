// TensorBoard logging of rank 0 (see header).
#include "worker/app/tensorboard_logger.h"

#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "common/io/atomic_file.h"
#include "common/security/scrub_secrets.h"
#include "common/util/log.h"
#include "common/util/wall_clock.h"
#include "worker/tensorboard/summary_writer.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

constexpr const char* kRunRecord = "tensorboard_run";

std::string read_first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool logs_d_times_lr(const std::string& optimizer_type) {
  std::string t;
  for (char c : optimizer_type) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t.rfind("dadapt", 0) == 0 || t == "prodigy";
}

}  // namespace

TensorBoardLogger::TensorBoardLogger(TensorBoardOptions options) : options_(std::move(options)) {}

TensorBoardLogger::~TensorBoardLogger() = default;

// The run folder: the one recorded by the run this one resumes, else a new timestamped one.
std::string TensorBoardLogger::open_run_folder(std::int64_t start_step) {
  const fs::path record = fs::path(options_.output_dir) / kRunRecord;
  if (start_step > 0 && fs::exists(record)) {
    // Only a folder of this logging_dir and log_prefix: a resume that changed them starts anew.
    const fs::path recorded = read_first_line(record);
    const bool same_place = recorded.parent_path() == fs::path(options_.logging_dir) &&
                            recorded.filename().string().rfind(options_.log_prefix, 0) == 0;
    if (!recorded.empty() && same_place && fs::is_directory(recorded)) return recorded.string();
  }
  const std::string run = (fs::path(options_.logging_dir) /
                           (options_.log_prefix + kohya_local_timestamp(std::time(nullptr))))
                              .string();
  fs::create_directories(options_.output_dir);
  write_file_atomic(record.string(), run + "\n");
  return run;
}

void TensorBoardLogger::on_start(std::int64_t total_steps, std::int64_t start_step) {
  (void)total_steps;
  const std::string run = open_run_folder(start_step);
  const std::string tracker =
      options_.log_tracker_name.empty() ? "network_train" : options_.log_tracker_name;
  event_dir_ = (fs::path(run) / tracker).string();
  const std::int64_t dropped = drop_events_after(event_dir_, start_step);
  if (dropped > 0) {
    LF_INFO("TensorBoard: dropped " << dropped << " events after step " << start_step << " from "
                                    << event_dir_ << " (the resumed run writes them again)");
  }
  writer_ = std::make_unique<SummaryWriter>(event_dir_);
  if (!options_.config_text.empty() && start_step == 0) {
    writer_->add_text("config", scrub_secrets(options_.config_text), 0);
  }
  writer_->flush();
  LF_INFO("TensorBoard logs: " << event_dir_ << " (tensorboard --logdir " << options_.logging_dir
                               << ")");
}

void TensorBoardLogger::on_step(const StepReport& r) {
  if (!writer_) return;
  if (r.epoch != epoch_) {
    epoch_ = r.epoch;
    step_in_epoch_ = 0;
  }
  if (step_in_epoch_ < epoch_losses_.size()) {
    epoch_losses_[step_in_epoch_] = r.loss;
  } else {
    epoch_losses_.push_back(r.loss);
  }
  ++step_in_epoch_;
  const double average = std::accumulate(epoch_losses_.begin(), epoch_losses_.end(), 0.0) /
                         static_cast<double>(epoch_losses_.size());
  average_ = average;
  const std::int64_t step = r.global_step;
  writer_->add_scalar("loss/current", r.loss, step);
  writer_->add_scalar("loss/average", average, step);
  const bool d_lr = logs_d_times_lr(options_.optimizer_type);
  for (const PartLearningRate& part : r.part_lrs) {
    writer_->add_scalar("lr/" + part.name, d_lr ? part.lr : part.logged_lr, step);
    if (d_lr) writer_->add_scalar("lr/d*lr/" + part.name, part.logged_lr, step);
  }
  if (r.grad_norm > 0) writer_->add_scalar("grad_norm", r.grad_norm, step);
  if (r.loss_scale > 0) writer_->add_scalar("loss_scale", r.loss_scale, step);
  if (r.step_seconds > 0) {
    writer_->add_scalar("perf/samples_per_second", r.global_samples / r.step_seconds, step);
    writer_->add_scalar("perf/step_seconds", r.step_seconds, step);
  }
  writer_->flush();
}

void TensorBoardLogger::on_sample_image(const SampleImageReport& image) {
  if (!writer_) return;
  writer_->add_image_png("sample_" + std::to_string(image.prompt_index), image.png, image.height,
                         image.width, 3, image.global_step);
  writer_->flush();
}

void TensorBoardLogger::on_validation(const ValidationReport& r) {
  if (!writer_) return;
  const std::string kind = r.epoch > 0 ? "epoch" : "step";
  writer_->add_scalar("loss/validation/" + kind + "_average", r.loss, r.global_step);
  writer_->add_scalar("loss/validation/" + kind + "_divergence", r.loss - average_, r.global_step);
  writer_->flush();
}

void TensorBoardLogger::on_end(bool completed) {
  (void)completed;
  if (writer_) writer_->flush();
}

}  // namespace lf
