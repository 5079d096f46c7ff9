// CoordinatorJob: dataset scan + summary at start-up, the step/epoch schedule once world_size
// is known, and a small cache of deterministic epoch plans.
#include "coordinator/job.h"

#include <filesystem>
#include <cstdlib>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/io/pickle_sniff.h"
#include "common/io/safetensors.h"
#include "common/util/log.h"

namespace lf {

ScanOptions scan_options_from(const DatasetSection& dataset) {
  ScanOptions o;
  o.train_data_dir = dataset.train_data_dir;
  o.reg_data_dir = dataset.reg_data_dir;
  o.caption_extension = dataset.caption_extension;
  o.buckets.resolution_w = dataset.resolution_w;
  o.buckets.resolution_h = dataset.resolution_h;
  o.buckets.enable_bucket = dataset.enable_bucket;
  o.buckets.min_bucket_reso = dataset.min_bucket_reso;
  o.buckets.max_bucket_reso = dataset.max_bucket_reso;
  o.buckets.bucket_reso_steps = dataset.bucket_reso_steps;
  o.buckets.bucket_no_upscale = dataset.bucket_no_upscale;
  return o;
}

static void log_dataset_summary(const Dataset& d) {
  int num_train = 0;
  int num_reg = 0;
  // bucket -> (train images, reg images)
  std::map<BucketReso, std::pair<int, int>> per_bucket;
  for (const ImageRecord& image : d.images) {
    auto& counts = per_bucket[image.bucket.bucket];
    if (image.is_reg) {
      ++num_reg;
      ++counts.second;
    } else {
      ++num_train;
      ++counts.first;
    }
  }
  LF_INFO("dataset: " << d.images.size() << " images (" << num_train << " train, " << num_reg
                      << " reg) in " << d.subsets.size() << " subsets, " << per_bucket.size()
                      << " buckets in use, N_train=" << d.num_train_samples
                      << " N_reg_raw=" << d.num_reg_samples_raw);
  for (const SubsetInfo& s : d.subsets) {
    LF_INFO("  subset " << s.name << (s.is_reg ? " (reg)" : "") << ": " << s.image_count
                        << " images x " << s.num_repeats << " repeats, class tokens \""
                        << s.class_tokens << "\"");
  }
  for (const auto& [bucket, counts] : per_bucket) {
    LF_INFO("  bucket " << bucket.width << "x" << bucket.height << ": " << counts.first
                        << " train, " << counts.second << " reg images");
  }
  if (num_reg > 0) {
    const std::vector<int> repeats = kohya_reg_repeats(d);
    int used = 0;
    std::int64_t reg_samples = 0;
    for (int r : repeats) {
      if (r > 0) ++used;
      reg_samples += r;
    }
    LF_INFO("  regularization: " << used << " images used, "
                                 << static_cast<int>(repeats.size()) - used
                                 << " unused, " << reg_samples << " reg samples per epoch");
    if (reg_samples < d.num_train_samples) {
      LF_WARN("not enough regularization images: " << reg_samples << " reg samples for N_train="
                                                    << d.num_train_samples);
    }
  }
}

// The base checkpoint must be a valid safetensors file: checked from its header (no tensor data
// is read) so that a pickle (.ckpt/.pt) or a truncated download fails here, once, before every
// rank loads a model.
namespace {
void validate_checkpoint_file(const std::string& path, const std::string& config_name) {
  try {
    SafetensorsFile::open(path);
  } catch (const std::exception& e) {
    std::string hint;
    if (looks_like_pickle(path)) {
      hint = "; this is a PyTorch pickle (.ckpt/.pt), which can run code when loaded and is "
             "refused: convert it to .safetensors first (e.g. diffusers' "
             "convert_original_stable_diffusion_to_diffusers or a safetensors converter)";
    }
    throw std::runtime_error(config_name + ": model.pretrained_model_name_or_path: " + e.what() +
                             hint);
  }
}
}  // namespace

CoordinatorJob::CoordinatorJob(JobConfig config) : config_(std::move(config)) {
  // Fail before any worker starts loading: every rank would otherwise fail the same way.
  const std::string& ckpt = config_.model.pretrained_model_name_or_path;
  if (!std::filesystem::is_regular_file(ckpt)) {
    throw std::runtime_error(config_.source_name + ": model.pretrained_model_name_or_path: " +
                             ckpt + " does not exist (expected a single-file .safetensors "
                             "checkpoint)");
  }
  validate_checkpoint_file(ckpt, config_.source_name);
  std::error_code ec;
  std::filesystem::create_directories(config_.output.output_dir, ec);
  if (ec) {
    throw std::runtime_error(config_.source_name + ": output.output_dir: cannot create " +
                             config_.output.output_dir + " (" + ec.message() + ")");
  }
  const std::string& vocab = config_.model.tokenizer_vocab;
  if (!std::filesystem::is_regular_file(vocab)) {
    throw std::runtime_error(config_.source_name + ": model.tokenizer_vocab: " + vocab +
                             " does not exist (expected bpe_simple_vocab_16e6.txt.gz; "
                             "scripts/install_deps.sh fetches it)");
  }
  dataset_ = scan_dreambooth_dataset(scan_options_from(config_.dataset));
  for (const std::string& w : dataset_.warnings) LF_WARN("dataset: " << w);
  log_dataset_summary(dataset_);
}

PlanOptions CoordinatorJob::plan_options(int world_size) const {
  PlanOptions o;
  o.seed = config_.training.seed;
  o.world_size = world_size;
  o.train_batch_size = config_.training.train_batch_size;
  o.prior_loss_weight = config_.training.prior_loss_weight;
  o.reg_selection = config_.dataset.reg_selection;
  return o;
}

JobSchedule CoordinatorJob::set_world_size(int world_size) {
  if (world_size < 1) {
    throw std::invalid_argument("world_size must be >= 1, got " + std::to_string(world_size));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (has_schedule_ && schedule_.world_size == world_size) return schedule_;
  }
  // Built outside the lock: plan 0 of a large dataset takes a moment.
  auto plan0 = std::make_shared<const EpochPlan>(
      build_epoch_plan(dataset_, plan_options(world_size), 0));
  JobSchedule s;
  s.world_size = world_size;
  s.steps_per_epoch = static_cast<int>(plan0->batches.size());
  if (s.steps_per_epoch <= 0) {
    throw std::invalid_argument("the dataset gives no training step per epoch (N_train=" +
                                std::to_string(dataset_.num_train_samples) + ")");
  }
  const TrainingSection& t = config_.training;
  if (t.max_train_epochs > 0) {
    s.num_epochs = t.max_train_epochs;
    s.max_train_steps = static_cast<std::int64_t>(s.num_epochs) * s.steps_per_epoch;
  } else {
    if (t.max_train_steps <= 0) {
      throw std::invalid_argument("training.max_train_steps must be > 0 when "
                                  "training.max_train_epochs is 0, got " +
                                  std::to_string(t.max_train_steps));
    }
    s.max_train_steps = t.max_train_steps;
    s.num_epochs = static_cast<int>((s.max_train_steps + s.steps_per_epoch - 1) /
                                    s.steps_per_epoch);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  schedule_ = s;
  has_schedule_ = true;
  plan_cache_.clear();
  plan_cache_[0] = std::move(plan0);
  LF_INFO("schedule for world_size " << s.world_size << ": " << s.steps_per_epoch
                                     << " steps/epoch x " << s.num_epochs << " epochs, "
                                     << "max_train_steps " << s.max_train_steps
                                     << " (train_batch_size " << t.train_batch_size
                                     << " per rank, global batch "
                                     << t.train_batch_size * s.world_size << ")");
  return s;
}

void CoordinatorJob::clear_world_size() {
  std::lock_guard<std::mutex> lock(mutex_);
  has_schedule_ = false;
  schedule_ = JobSchedule{};
  plan_cache_.clear();
}

bool CoordinatorJob::has_schedule() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return has_schedule_;
}

JobSchedule CoordinatorJob::schedule() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!has_schedule_) throw std::logic_error("the job has no schedule yet (world_size unknown)");
  return schedule_;
}

std::shared_ptr<const EpochPlan> CoordinatorJob::epoch_plan(int epoch) const {
  // One lock around lookup and build: ranks ask for the same epoch at about the same time,
  // and then one builds while the others wait for the cached result.
  std::lock_guard<std::mutex> lock(mutex_);
  if (!has_schedule_) throw std::logic_error("the job has no schedule yet (world_size unknown)");
  if (epoch < 0 || epoch >= schedule_.num_epochs) {
    throw std::out_of_range("epoch " + std::to_string(epoch) + " is outside [0, " +
                            std::to_string(schedule_.num_epochs) + ")");
  }
  auto it = plan_cache_.find(epoch);
  if (it != plan_cache_.end()) return it->second;
  auto plan = std::make_shared<const EpochPlan>(
      build_epoch_plan(dataset_, plan_options(schedule_.world_size), epoch));
  plan_cache_[epoch] = plan;
  // Evict the epoch farthest from the one asked for (workers move forward together).
  while (plan_cache_.size() > kPlanCacheSize) {
    auto far = plan_cache_.begin();
    if (std::abs(std::prev(plan_cache_.end())->first - epoch) > std::abs(far->first - epoch)) {
      far = std::prev(plan_cache_.end());
    }
    plan_cache_.erase(far);
  }
  return plan;
}

}  // namespace lf
