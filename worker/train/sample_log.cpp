// Per-sample JSON-lines log (see header).
#include "worker/train/sample_log.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace lf {

SampleLog::SampleLog(const std::string& path, int rank) : rank_(rank) {
  if (path.empty()) return;
  file_ = path + ".rank" + std::to_string(rank) + ".jsonl";
  out_.open(file_, std::ios::app);
  if (!out_) throw std::runtime_error("--sample-log: cannot open " + file_ + " for appending");
}

void SampleLog::write(std::int64_t global_step, int epoch, std::int64_t batch,
                      const PlanSample& sample, double lr) {
  if (!enabled()) return;
  const nlohmann::json line = {{"global_step", global_step},
                               {"epoch", epoch},
                               {"batch", batch},
                               {"rank", rank_},
                               {"image_index", sample.image_index},
                               {"flip", sample.crop_flip.flip},
                               {"crop_left", sample.crop_flip.crop_left},
                               {"crop_top", sample.crop_flip.crop_top},
                               {"lr", lr}};
  out_ << line.dump() << '\n';
}

void SampleLog::flush() {
  if (!enabled()) return;
  out_.flush();
  if (!out_) throw std::runtime_error("--sample-log: cannot write " + file_);
}

}  // namespace lf
