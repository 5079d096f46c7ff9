// The inspect report (see header). Built from the same scan, plan and schedule code the
// coordinator runs, so what it prints is what training will do.
#include "coordinator/inspect.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

#include "coordinator/job.h"

namespace lf {
namespace {

std::string yes_no(bool b) { return b ? "true" : "false"; }

std::string size_text(int w, int h) { return std::to_string(w) + "x" + std::to_string(h); }

}  // namespace

std::string inspect_job(JobConfig config, const InspectOptions& options) {
  if (options.world_size < 1 || options.gradient_accumulation_steps < 0 ||
      options.batch_size < 0) {
    throw std::invalid_argument(
        "inspect: expected --world-size >= 1, --gradient-accumulation-steps >= 1 and "
        "--batch-size >= 1");
  }
  if (options.batch_size > 0) {
    for (DatasetConfig& d : config.datasets) d.batch_size = options.batch_size;
  }
  CoordinatorJob job(config, /*check_model_files=*/false);
  const Dataset& ds = job.dataset();
  const JobSchedule sched =
      job.set_world_size(options.world_size, options.gradient_accumulation_steps);
  const int accum = sched.gradient_accumulation_steps;
  const PlanOptions plan_options = job.plan_options(options.world_size);
  const auto plan0 = job.epoch_plan(0);

  std::ostringstream out;
  out << "lorafleet inspect: " << config.source_name << "\n";
  // Reg usage of epoch 1, per image.
  std::vector<int> reg_count(ds.images.size(), 0);
  for (int i : plan0->reg_indices) ++reg_count[i];
  // Samples of epoch 1 per (dataset, bucket).
  std::map<std::pair<int, BucketReso>, std::int64_t> samples_per_bucket;
  for (const GlobalBatch& b : plan0->batches) {
    samples_per_bucket[{b.dataset_index, b.bucket}] += static_cast<std::int64_t>(b.samples.size());
  }

  for (std::size_t d = 0; d < ds.datasets.size(); ++d) {
    const DatasetInfo& info = ds.datasets[d];
    const BucketOptions& bo = info.buckets;
    out << "\ndataset " << d + 1
        << (config.datasets[d].origin.empty() ? "" : " (" + config.datasets[d].origin + ")")
        << ": resolution " << size_text(bo.resolution_w, bo.resolution_h) << ", batch_size "
        << info.batch_size << " per rank, enable_bucket " << yes_no(bo.enable_bucket)
        << ", min_bucket_reso " << bo.min_bucket_reso << ", max_bucket_reso "
        << bo.max_bucket_reso << ", bucket_reso_steps " << bo.bucket_reso_steps
        << ", bucket_no_upscale " << yes_no(bo.bucket_no_upscale) << "\n";
    out << "  subsets:\n";
    for (std::size_t s = 0; s < ds.subsets.size(); ++s) {
      const SubsetInfo& sub = ds.subsets[s];
      if (sub.dataset_index != static_cast<int>(d)) continue;
      const SubsetConfig& c = sub.config;
      out << "    [" << (c.is_reg ? "reg" : "train") << "] " << sub.image_dir << ": "
          << sub.image_count << " images x " << c.num_repeats << " repeats = "
          << static_cast<std::int64_t>(sub.image_count) * c.num_repeats << " samples";
      if (c.is_reg) {
        int used = 0;
        std::int64_t samples = 0;
        for (const ImageRecord& img : ds.images) {
          if (img.subset_index != static_cast<int>(s)) continue;
          used += reg_count[img.index] > 0 ? 1 : 0;
          samples += reg_count[img.index];
        }
        out << "; epoch 1 uses " << used << " of them (" << samples << " samples)";
      }
      const CaptionOptions& co = c.caption;
      out << "\n      class_tokens \"" << c.class_tokens << "\", caption_extension "
          << c.caption_extension << ", caption_prefix \"" << co.caption_prefix
          << "\", caption_suffix \"" << co.caption_suffix << "\", caption_separator \""
          << co.caption_separator << "\", shuffle_caption " << yes_no(co.shuffle_caption)
          << ", keep_tokens " << co.keep_tokens << ", keep_tokens_separator \""
          << co.keep_tokens_separator << "\", caption_dropout_rate " << co.caption_dropout_rate
          << ", caption_dropout_every_n_epochs " << co.caption_dropout_every_n_epochs
          << ", caption_tag_dropout_rate " << co.caption_tag_dropout_rate << ", flip_aug "
          << yes_no(c.flip_aug) << ", random_crop " << yes_no(c.random_crop) << ", alpha_mask "
          << yes_no(c.alpha_mask) << "\n";
    }
    // kohya's bucket table: images (without repeats) per bucket, plus epoch-1 samples.
    std::map<BucketReso, int> images_per_bucket;
    double ar_error_sum = 0.0;
    int n_images = 0;
    for (const ImageRecord& img : ds.images) {
      if (img.dataset_index != static_cast<int>(d)) continue;
      ++images_per_bucket[img.bucket.bucket];
      ar_error_sum += std::fabs(img.bucket.ar_error);
      ++n_images;
    }
    // kohya's lines: i indexes the predefined bucket list (the sorted buckets in use in
    // no-upscale mode) and count is the bucket's samples, repeats and reg included.
    out << "  buckets (count: samples in epoch 1; images without repeats):\n";
    const std::vector<BucketReso>& predefined = info.predefined_buckets;
    int k = 0;
    for (const auto& [bucket, images] : images_per_bucket) {
      auto at = std::find(predefined.begin(), predefined.end(), bucket);
      const long index = at != predefined.end() ? static_cast<long>(at - predefined.begin()) : k;
      ++k;
      out << "    bucket " << index << ": resolution (" << bucket.width << ", " << bucket.height
          << "), count: " << samples_per_bucket[{static_cast<int>(d), bucket}] << "; "
          << images << " images\n";
    }
    if (n_images > 0) out << "  mean ar error (without repeats): " << ar_error_sum / n_images << "\n";
    out << "  number of train images (including repeats): " << info.num_train_samples << "\n";
    out << "  number of reg images (including repeats): " << info.num_reg_samples_raw << "\n";
  }

  if (!ds.bad_images.empty()) {
    out << "\nbad images skipped (on_bad_image: skip): " << ds.bad_images.size() << "\n";
    for (const BadImage& b : ds.bad_images) out << "  " << b.reason << "\n";
  }
  if (!ds.warnings.empty()) out << "\nwarnings: " << ds.warnings.size() << " (logged above)\n";

  // Optimizer steps per epoch with gradient accumulation, as kohya:
  // ceil(batches / gradient_accumulation_steps); the schedule computed them.
  const std::vector<std::int64_t>& batches = sched.epoch_batches;
  const std::vector<std::int64_t>& steps = sched.epoch_steps;
  const std::int64_t total = sched.max_train_steps;
  out << "\nschedule (world_size " << options.world_size << ", gradient_accumulation_steps "
      << accum << ", reg_selection " << plan_options.reg_selection << "):\n";
  for (std::size_t d = 0; d < ds.datasets.size(); ++d) {
    const int global = ds.datasets[d].batch_size * options.world_size;
    out << "  dataset " << d + 1 << ": batch size per device " << ds.datasets[d].batch_size
        << ", global batch " << global << ", samples per optimizer step " << global * accum
        << "\n";
  }
  bool uniform = true;
  for (std::int64_t b : batches) uniform = uniform && b == batches[0];
  if (uniform) {
    out << "  num batches per epoch: " << batches[0] << "\n";
    out << "  optimizer steps per epoch: " << steps[0] << "\n";
  } else {
    out << "  num batches per epoch (epochs differ):";
    for (std::size_t e = 0; e < batches.size(); ++e) out << " " << batches[e];
    out << "\n  optimizer steps per epoch:";
    for (std::int64_t s : steps) out << " " << s;
    out << "\n";
  }
  out << "  num epochs: " << steps.size() << "\n";
  out << "  total optimization steps: " << total << "\n";
  if (ds.num_reg_samples_raw > 0) {
    out << "  regularization: epoch 1 uses " << plan0->reg_images_used << " reg images, "
        << plan0->reg_images_unused << " unused in epoch 1, " << sched.reg_images_never_used
        << " in none of the " << sched.num_epochs << " epoch plans\n";
    const int listed = std::min<int>(options.epochs_listed, sched.num_epochs);
    for (int e = 0; e < listed; ++e) {
      const auto plan = job.epoch_plan(e);
      out << "    epoch " << e + 1 << ": " << plan->reg_images_used << " reg images, "
          << plan->reg_indices.size() << " reg samples, " << plan->batches.size()
          << " batches\n";
    }
  }
  return out.str();
}

}  // namespace lf
