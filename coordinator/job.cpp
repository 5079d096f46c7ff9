// CoordinatorJob: dataset scan + summary at start-up, the step/epoch schedule once world_size
// is known, and a small cache of deterministic epoch plans.
#include "coordinator/job.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/config/lr_schedule_keys.h"
#include "common/config/sample_prompts.h"
#include "common/io/pickle_sniff.h"
#include "common/io/safetensors.h"
#include "common/util/log.h"
#include "proto/proto_convert.h"

namespace lf {

ScanOptions scan_options_from(const JobConfig& config) {
  ScanOptions o;
  o.datasets = config.datasets;
  o.on_bad_image = config.dataset.on_bad_image;
  o.decode.max_pixels = config.dataset.max_image_pixels;
  o.threads = config.dataset.scan_threads;
  o.validation_seed = config.training.seed;  // kohya: --validation_seed, else --seed
  return o;
}

static void log_dataset_summary(const Dataset& d) {
  int num_reg = 0;
  for (const ImageRecord& image : d.images) num_reg += image.is_reg ? 1 : 0;
  LF_INFO("dataset: " << d.images.size() << " images (" << d.images.size() - num_reg
                      << " train, " << num_reg << " reg) in " << d.subsets.size()
                      << " subsets of " << d.datasets.size() << " dataset(s), N_train="
                      << d.num_train_samples << " N_reg_raw=" << d.num_reg_samples_raw
                      << (d.bad_images.empty()
                              ? std::string()
                              : ", " + std::to_string(d.bad_images.size()) + " bad images skipped"));
  for (const SubsetInfo& s : d.subsets) {
    LF_INFO("  dataset " << s.dataset_index + 1 << " subset " << s.name
                         << (s.config.is_reg ? " (reg)" : "") << ": " << s.image_count
                         << " images x " << s.config.num_repeats << " repeats, class tokens \""
                         << s.config.class_tokens << "\""
                         << (s.validation_count > 0 ? ", " + std::to_string(s.validation_count) +
                                                          " held out for validation"
                                                    : std::string()));
  }
  if (d.num_validation_images > 0) {
    std::string names;
    int shown = 0;
    for (const ImageRecord& image : d.images) {
      if (!image.is_validation || shown++ >= 10) continue;
      names += (names.empty() ? "" : ", ") + std::filesystem::path(image.path).filename().string();
    }
    if (shown > 10) names += " and " + std::to_string(shown - 10) + " more";
    LF_INFO("  held out for validation (validation_split): " << d.num_validation_images
                                                             << " images: " << names);
  }
  // bucket -> (train images, reg images), per dataset
  std::map<std::pair<int, BucketReso>, std::pair<int, int>> per_bucket;
  for (const ImageRecord& image : d.images) {
    if (image.is_validation) continue;
    auto& counts = per_bucket[{image.dataset_index, image.bucket.bucket}];
    (image.is_reg ? counts.second : counts.first) += 1;
  }
  for (const auto& [key, counts] : per_bucket) {
    LF_INFO("  dataset " << key.first + 1 << " bucket " << key.second.width << "x"
                         << key.second.height << ": " << counts.first << " train, "
                         << counts.second << " reg images");
  }
}

// The base checkpoint must be a valid safetensors file: checked from its header (no tensor data
// is read) so that a pickle (.ckpt/.pt) or a truncated download fails here, once, before every
// rank loads a model.
namespace {
void validate_checkpoint_file(const std::string& path, const std::string& config_name,
                              const std::string& key = "model.pretrained_model_name_or_path") {
  if (!std::filesystem::is_regular_file(path)) {
    throw ConfigError(config_name + ": " + key + ": " + path +
                      " does not exist (expected a single-file .safetensors " +
                      (key == "network.network_weights" ? "LoRA" : "checkpoint") + ")");
  }
  try {
    SafetensorsFile::open(path);
  } catch (const std::exception& e) {
    std::string hint;
    if (looks_like_pickle(path)) {
      hint = "; this is a PyTorch pickle (.ckpt/.pt), which can run code when loaded and is "
             "refused: convert it to a single-file .safetensors with the same keys first (see "
             "docs/models.md; a diffusers folder is not a single file)";
    }
    throw ConfigError(config_name + ": " + key + ": " + e.what() + hint);
  }
}
}  // namespace

// validate_every_n_* or max_validation_steps without a held-out image: say so, as kohya's
// empty validation dataloader does nothing either.
void CoordinatorJob::warn_validation_without_images() const {
  const TrainingSection& t = config_.training;
  if (dataset_.num_validation_images > 0) return;
  if (t.validate_every_n_steps == 0 && t.validate_every_n_epochs == 0 &&
      t.max_validation_steps == 0) {
    return;
  }
  bool split = false;
  for (const DatasetConfig& d : config_.datasets) split = split || d.validation_split > 0;
  LF_WARN(config_.source_name
          << ": training.validate_every_n_steps / validate_every_n_epochs / "
             "max_validation_steps are set, but no image is held out: "
          << (split ? "validation_split rounds to 0 images of every train subset (round(n x "
                      "split) of n images, at most n - 1); raise it"
                    : "set dataset.validation_split (e.g. 0.1)")
          << "; no validation loss will be computed");
}

CoordinatorJob::CoordinatorJob(JobConfig config, bool check_model_files)
    : config_(std::move(config)) {
  for (const std::string& w : config_.dataset_warnings) LF_WARN("config: " << w);
  if (check_model_files) check_job_files();
  read_sample_prompts();
  dataset_ = scan_dataset(scan_options_from(config_));
  for (const std::string& w : dataset_.warnings) LF_WARN("dataset: " << w);
  log_dataset_summary(dataset_);
  warn_validation_without_images();
  if (check_model_files) {
    // Only once the scan succeeded: a job that fails on its data leaves nothing behind.
    std::error_code ec;
    std::filesystem::create_directories(config_.output.output_dir, ec);
    if (ec) {
      throw ConfigError(config_.source_name + ": output.output_dir: cannot create " +
                        config_.output.output_dir + " (" + ec.message() + ")");
    }
  }
}

void CoordinatorJob::read_sample_prompts() {
  const std::string& path = config_.output.sample_prompts;
  if (path.empty()) return;
  try {
    config_.sample_prompts_text = read_sample_prompts_file(path);
    const auto prompts = parse_sample_prompts(config_.sample_prompts_text, path);
    LF_INFO("sample images: " << prompts.size() << " prompts from " << path);
  } catch (const std::runtime_error& e) {
    throw ConfigError(config_.source_name + ": output.sample_prompts: " + e.what());
  }
}

void CoordinatorJob::check_job_files() const {
  // Fail before any worker starts loading: every rank would otherwise fail the same way.
  validate_checkpoint_file(config_.model.pretrained_model_name_or_path, config_.source_name);
  // A LoRA to continue from (kohya --network_weights): every rank would open it after loading
  // the model.
  if (!config_.network.network_weights.empty()) {
    validate_checkpoint_file(config_.network.network_weights, config_.source_name,
                             "network.network_weights");
  }
  const std::string& vocab = config_.model.tokenizer_vocab;
  if (!std::filesystem::is_regular_file(vocab)) {
    throw ConfigError(config_.source_name + ": model.tokenizer_vocab: " + vocab +
                      " does not exist (expected bpe_simple_vocab_16e6.txt.gz; "
                      "scripts/install_deps.sh fetches it)");
  }
}

PlanOptions CoordinatorJob::plan_options(int world_size) const {
  PlanOptions o;
  o.seed = config_.training.seed;
  o.world_size = world_size;
  o.prior_loss_weight = config_.training.prior_loss_weight;
  o.reg_selection = config_.dataset.reg_selection;
  return o;
}

void CoordinatorJob::check_lr_schedule_over(std::int64_t total_steps) const {
  if (const auto e = check_lr_schedule(config_.training, total_steps)) {
    throw ConfigError(config_.source_name + ": key 'training." + e->key + "': " + e->problem);
  }
}

JobSchedule CoordinatorJob::set_world_size(int world_size, int gradient_accumulation_steps) {
  if (world_size < 1) {
    throw std::invalid_argument("world_size must be >= 1, got " + std::to_string(world_size));
  }
  const int accum = gradient_accumulation_steps > 0
                        ? gradient_accumulation_steps
                        : config_.training.gradient_accumulation_steps;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (has_schedule_ && schedule_.world_size == world_size &&
        schedule_.gradient_accumulation_steps == accum) {
      if (resumed_) {
        resumed_ = false;
        resumed_epoch_ = -1;
        resumed_lineage_.clear();
        schedule_ = fresh_schedule_;
        plan_cache_.clear();
      }
      return schedule_;
    }
  }
  // A plan holds every sample of its epoch (as kohya's bucket lists do): refuse sizes that
  // would exhaust memory with a message rather than die in std::bad_alloc.
  std::int64_t samples_per_epoch = 0;
  for (std::size_t d = 0; d < dataset_.datasets.size(); ++d) {
    const DatasetInfo& info = dataset_.datasets[d];
    samples_per_epoch += info.num_train_samples;
    if (info.num_reg_samples_raw == 0) continue;
    if (config_.dataset.reg_selection == "first") {
      // kohya's first pass gives each reg image all its repeats: it can overshoot N_train.
      for (int r : kohya_reg_repeats(dataset_, static_cast<int>(d))) samples_per_epoch += r;
    } else {
      samples_per_epoch += info.num_train_samples;
    }
  }
  if (samples_per_epoch > kMaxSamplesPerEpoch) {
    throw std::invalid_argument(
        "an epoch would hold " + std::to_string(samples_per_epoch) +
        " samples (images x num_repeats, plus as many regularization samples), more than the " +
        std::to_string(kMaxSamplesPerEpoch) + " lorafleet plans per epoch; lower num_repeats "
        "(max_train_steps, not the epoch length, sets how long training runs)");
  }
  // Built outside the lock: the plans of a large dataset take a moment.
  const PlanOptions options = plan_options(world_size);
  auto plan0 = std::make_shared<const EpochPlan>(build_epoch_plan(dataset_, options, 0));
  {
    // Every rank fetches each plan in one message: it must fit the workers' receive limit
    // (with room for epochs whose random captions or reg choice make them a little larger).
    lorafleet::v1::EpochPlan message;
    to_proto(*plan0, &message);
    const std::size_t bytes = message.ByteSizeLong();
    if (bytes > kMaxPlanMessageBytes / 10 * 9) {
      throw std::invalid_argument(
          "the plan of epoch 1 is " + std::to_string(bytes) + " bytes, above the " +
          std::to_string(kMaxPlanMessageBytes / 10 * 9) +
          " bytes a worker accepts; lower num_repeats or the number of images per job");
    }
  }
  JobSchedule s;
  s.world_size = world_size;
  s.gradient_accumulation_steps = accum;
  if (plan0->batches.empty()) {
    throw std::invalid_argument("the dataset gives no training step per epoch (N_train=" +
                                std::to_string(dataset_.num_train_samples) + ")");
  }
  // With kohya's "first" rule (or no reg images) every epoch has the same samples, so plan 0's
  // length holds for all; random/rotate choose other reg images per epoch, so each epoch's plan
  // is built once here to learn its length and which reg images it uses.
  std::vector<bool> reg_used(dataset_.images.size(), false);
  const bool same_every_epoch = options.reg_selection == "first" ||
                                dataset_.num_reg_samples_raw == 0;
  auto account = [&](std::int64_t batches) {
    s.epoch_batches.push_back(batches);
    s.epoch_steps.push_back((batches + accum - 1) / accum);
  };
  auto account_plan = [&](const EpochPlan& plan) {
    for (int i : plan.reg_indices) reg_used[i] = true;
    account(static_cast<std::int64_t>(plan.batches.size()));
  };
  auto next_epoch = [&](int epoch) {
    if (epoch == 0) return account_plan(*plan0);
    if (same_every_epoch) return account(s.epoch_batches[0]);
    account_plan(build_epoch_plan(dataset_, options, epoch));
  };
  const TrainingSection& t = config_.training;
  if (t.max_train_epochs > 0) {
    s.num_epochs = t.max_train_epochs;
    for (int e = 0; e < s.num_epochs; ++e) next_epoch(e);
    for (std::int64_t n : s.epoch_steps) s.max_train_steps += n;
  } else {
    if (t.max_train_steps <= 0) {
      throw std::invalid_argument("training.max_train_steps must be > 0 when "
                                  "training.max_train_epochs is 0, got " +
                                  std::to_string(t.max_train_steps));
    }
    s.max_train_steps = t.max_train_steps;
    std::int64_t covered = 0;
    while (covered < s.max_train_steps) {
      next_epoch(s.num_epochs++);
      if (s.epoch_steps.back() <= 0) {
        throw std::invalid_argument("epoch " + std::to_string(s.num_epochs) +
                                    " of the plan holds no training step");
      }
      covered += s.epoch_steps.back();
    }
  }
  s.steps_per_epoch = static_cast<int>(s.epoch_steps[0]);
  check_lr_schedule_over(s.max_train_steps);
  for (const ImageRecord& img : dataset_.images) {
    if (img.is_reg && !reg_used[img.index]) ++s.reg_images_never_used;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  schedule_ = s;
  fresh_schedule_ = s;
  has_schedule_ = true;
  resumed_ = false;
  resumed_epoch_ = -1;
  resumed_lineage_.clear();
  plan_cache_.clear();
  plan_cache_[0] = std::move(plan0);
  std::int64_t min_steps = s.epoch_steps[0], max_steps = s.epoch_steps[0];
  for (std::int64_t n : s.epoch_steps) {
    min_steps = std::min(min_steps, n);
    max_steps = std::max(max_steps, n);
  }
  LF_INFO("schedule for world_size " << s.world_size << ": "
                                     << (min_steps == max_steps
                                             ? std::to_string(min_steps)
                                             : std::to_string(min_steps) + ".." +
                                                   std::to_string(max_steps))
                                     << " steps/epoch x " << s.num_epochs << " epochs, "
                                     << "max_train_steps " << s.max_train_steps
                                     << ", gradient_accumulation_steps " << accum);
  if (dataset_.num_reg_samples_raw > 0) {
    LF_INFO("regularization (reg_selection " << options.reg_selection << "): epoch 1 uses "
                                             << plan_cache_[0]->reg_images_used << " reg images ("
                                             << plan_cache_[0]->reg_indices.size()
                                             << " samples); " << s.reg_images_never_used
                                             << " reg images are in none of the job's "
                                             << s.num_epochs << " epoch plans");
  }
  return s;
}

JobSchedule CoordinatorJob::set_resume(const TrainPosition& resume) {
  JobSchedule s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!has_schedule_) {
      throw std::logic_error("the job has no schedule yet (world_size unknown)");
    }
    s = fresh_schedule_;
  }
  const PlanOptions options = plan_options(s.world_size);
  const std::int64_t accum = s.gradient_accumulation_steps;
  // At an epoch's start the lineage is the finished epoch's, not one of `resume.epoch`.
  const std::vector<PlanSegment> consumed =
      resume.step_in_epoch > 0 ? resume.plan_lineage : std::vector<PlanSegment>{};
  std::int64_t lineage_batches = 0;
  for (const PlanSegment& seg : consumed) {
    if (seg.world_size < 1 || seg.batches < 0) {
      throw std::invalid_argument("resume: a plan segment has world_size " +
                                  std::to_string(seg.world_size) + " and " +
                                  std::to_string(seg.batches) + " batches");
    }
    lineage_batches += seg.batches;
  }
  if (resume.epoch < 0 || resume.global_step < 0 || lineage_batches != resume.step_in_epoch) {
    throw std::invalid_argument(
        "resume: epoch " + std::to_string(resume.epoch) + ", global_step " +
        std::to_string(resume.global_step) + ", " + std::to_string(resume.step_in_epoch) +
        " batches consumed, but the plan lineage adds up to " + std::to_string(lineage_batches));
  }
  // The resumed epoch's plan: the checkpoint's, continued on this world size after its prefix.
  std::vector<PlanSegment> lineage;
  if (resume.step_in_epoch > 0) {
    lineage = consumed;
    lineage.push_back({s.world_size, 0});
  }
  const int r = resume.epoch;
  const TrainingSection& t = config_.training;
  const bool same_every_epoch =
      options.reg_selection == "first" || dataset_.num_reg_samples_raw == 0;
  const bool past_end = t.max_train_epochs > 0 && r >= t.max_train_epochs;
  std::shared_ptr<const EpochPlan> resumed;
  if (!past_end) {
    resumed = std::make_shared<const EpochPlan>(
        build_continued_epoch_plan(dataset_, options, r, lineage));
  }
  const std::int64_t resumed_batches =
      resumed ? static_cast<std::int64_t>(resumed->batches.size()) : 0;
  if (resumed && resume.step_in_epoch >= resumed_batches) {
    throw std::invalid_argument("resume: " + std::to_string(resume.step_in_epoch) +
                                " batches of epoch " + std::to_string(r + 1) +
                                " consumed, but its plan holds " + std::to_string(resumed_batches));
  }
  auto batches_of = [&](int e) -> std::int64_t {
    if (e == r && resumed) return resumed_batches;
    if (e < static_cast<int>(s.epoch_batches.size())) return s.epoch_batches[e];
    if (same_every_epoch) return s.epoch_batches[0];
    return static_cast<std::int64_t>(build_epoch_plan(dataset_, options, e).batches.size());
  };
  auto steps_of = [&](std::int64_t batches) { return (batches + accum - 1) / accum; };
  // Checkpoints fall on optimizer steps, so the consumed prefix is whole steps.
  const std::int64_t remaining =
      resumed ? steps_of(resumed_batches) - resume.step_in_epoch / accum : 0;
  JobSchedule out = s;
  if (t.max_train_epochs > 0) {
    out.num_epochs = t.max_train_epochs;
    out.max_train_steps = resume.global_step + remaining;
    for (int e = r + 1; e < out.num_epochs; ++e) out.max_train_steps += steps_of(batches_of(e));
  } else {
    std::int64_t covered = resume.global_step + remaining;
    int e = r + 1;
    while (covered < out.max_train_steps) {
      const std::int64_t n = steps_of(batches_of(e));
      if (n <= 0) {
        throw std::invalid_argument("epoch " + std::to_string(e + 1) +
                                    " of the plan holds no training step");
      }
      covered += n;
      ++e;
    }
    out.num_epochs = e;
  }
  check_lr_schedule_over(out.max_train_steps);
  out.epoch_batches.clear();
  out.epoch_steps.clear();
  for (int e = 0; e < out.num_epochs; ++e) {
    out.epoch_batches.push_back(batches_of(e));
    out.epoch_steps.push_back(steps_of(out.epoch_batches.back()));
  }
  if (!out.epoch_steps.empty()) out.steps_per_epoch = static_cast<int>(out.epoch_steps[0]);
  std::lock_guard<std::mutex> lock(mutex_);
  schedule_ = out;
  plan_cache_.clear();
  resumed_ = true;
  resumed_epoch_ = resumed ? r : -1;
  resumed_lineage_ = lineage;
  if (resumed) plan_cache_[r] = resumed;
  LF_INFO("resume at global_step "
          << resume.global_step << ", epoch " << r + 1 << " after " << resume.step_in_epoch
          << " batches: " << remaining << " steps left in that epoch on world_size "
          << out.world_size << ", max_train_steps " << out.max_train_steps << ", " << out.num_epochs
          << " epochs");
  return out;
}

EpochPlan CoordinatorJob::full_epoch_plan(int epoch, int world_size) const {
  return build_epoch_plan(dataset_, plan_options(world_size), epoch);
}

void CoordinatorJob::clear_world_size() {
  std::lock_guard<std::mutex> lock(mutex_);
  resumed_ = false;
  resumed_epoch_ = -1;
  resumed_lineage_.clear();
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
  // The resumed epoch is rebuilt (after an eviction) as the same continued plan.
  auto plan = std::make_shared<const EpochPlan>(
      epoch == resumed_epoch_
          ? build_continued_epoch_plan(dataset_, plan_options(schedule_.world_size), epoch,
                                       resumed_lineage_)
          : build_epoch_plan(dataset_, plan_options(schedule_.world_size), epoch));
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
