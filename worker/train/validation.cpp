// Validation (see header).
#include "worker/train/validation.h"

#include <torch/torch.h>

#include <optional>
#include <random>
#include <string>

#include "common/data/caption.h"
#include "common/data/validation_split.h"
#include "common/util/elapsed.h"
#include "worker/core/train/autocast.h"
#include "worker/core/train/optimizer.h"
#include "worker/core/train/train_step.h"
#include "worker/dist/parameter_sync.h"
#include "worker/train/rng_streams.h"
#include "worker/train/step_inputs.h"

namespace lf {

std::vector<std::int64_t> Validation::timesteps(std::int64_t min_timestep,
                                                std::int64_t max_timestep) {
  // np.linspace(min, max, 6, dtype=int): min + k (max - min) / 5, truncated toward zero.
  std::vector<std::int64_t> out;
  for (int k = 1; k <= 4; ++k) {
    const double v = static_cast<double>(min_timestep) +
                     k * static_cast<double>(max_timestep - min_timestep) / 5.0;
    out.push_back(static_cast<std::int64_t>(v));
  }
  return out;
}

namespace {

// Random captions (shuffled, dropped out) get their prefix and suffix only when planned, so their
// base caption lacks them. A validation sample is scored with the caption processed once without
// the randomness (no shuffle, no dropout: kohya's process_caption then joins prefix and suffix
// and leaves the rest as written): the same text at every validation, with the trigger words
// every training caption of the subset carries. nullopt: the base caption is final already.
std::optional<std::string> fixed_validation_caption(const Dataset& dataset,
                                                    const ImageRecord& img) {
  if (img.subset_index < 0 || img.subset_index >= static_cast<int>(dataset.subsets.size())) {
    return std::nullopt;
  }
  CaptionOptions options = dataset.subsets[img.subset_index].config.caption;
  if (!options.is_random()) return std::nullopt;
  options.shuffle_caption = false;
  options.caption_dropout_rate = 0.0;
  options.caption_dropout_every_n_epochs = 0;
  options.caption_tag_dropout_rate = 0.0;
  std::mt19937_64 unused(0);  // nothing random is left to draw
  return process_caption(img.caption, options, 1, unused);
}

}  // namespace

std::vector<GlobalBatch> Validation::make_batches(const Dataset& dataset, int max_batches) {
  std::vector<GlobalBatch> out;
  for (const int index : validation_images(dataset)) {
    const ImageRecord& img = dataset.images[index];
    const int batch_size = dataset.datasets[img.dataset_index].batch_size;
    const bool same_group = !out.empty() && out.back().dataset_index == img.dataset_index &&
                            out.back().bucket == img.bucket.bucket;
    if (!same_group || static_cast<int>(out.back().samples.size()) >= batch_size) {
      if (max_batches > 0 && static_cast<int>(out.size()) >= max_batches) break;
      GlobalBatch b;
      b.dataset_index = img.dataset_index;
      b.bucket = img.bucket.bucket;
      b.batch_size = batch_size;
      out.push_back(std::move(b));
    }
    PlanSample sample;  // centre crop, no flip, the base caption, loss weight 1
    sample.image_index = index;
    if (auto caption = fixed_validation_caption(dataset, img)) {
      sample.caption = std::move(*caption);
      sample.has_caption = true;
    }
    out.back().samples.push_back(sample);
  }
  return out;
}

Validation::Validation(const JobConfig& config, const TrainingSession& s)
    : config_(config),
      batches_(make_batches(s.dataset, config.training.max_validation_steps)),
      timesteps_(timesteps(s.recipe.noise.min_timestep, s.recipe.noise.max_timestep)) {}

bool Validation::due_after_step(std::int64_t global_step) const {
  const int n = config_.training.validate_every_n_steps;
  return enabled() && n > 0 && global_step % n == 0;
}

bool Validation::due_after_epoch(int epoch) const {
  const int n = config_.training.validate_every_n_epochs;
  return enabled() && (n == 0 || epoch % n == 0);
}

ValidationResult Validation::run(TrainingSession& s) const {
  const auto t0 = SteadyClock::now();
  double loss_sum = 0.0;
  double count = 0.0;
  {
    torch::NoGradGuard no_grad;
    s.optimizer->use_eval_weights();  // kohya: optimizer_eval_fn() around validation
    AutocastScope amp(s.device.type(), s.precision.weight_dtype, s.precision.autocast);
    for (std::size_t j = s.rank; j < batches_.size(); j += s.world_size) {
      const GlobalBatch& batch = batches_[j];
      // Rank 0's slice of a batch of batch_size samples is the whole batch.
      std::optional<StepInputs> in =
          build_step_inputs(batch, /*rank=*/0, *s.latents, s.texts.get(), *s.encoders,
                            s.base.models.preset, s.dataset, s.device, s.precision.weight_dtype);
      if (!in) continue;
      const DatasetConfig& dc = config_.datasets[batch.dataset_index];
      const auto seed = static_cast<std::uint64_t>(
          dc.validation_seed.value_or(static_cast<std::int64_t>(config_.training.seed)));
      for (std::size_t k = 0; k < timesteps_.size(); ++k) {
        DiffusionRecipe recipe = s.recipe;  // kohya: min_timestep = max_timestep = t
        recipe.noise.min_timestep = recipe.noise.max_timestep = timesteps_[k];
        at::Generator gen =
            make_validation_generator(seed, static_cast<std::int64_t>(j), static_cast<int>(k));
        loss_sum +=
            compute_loss_sum(s.base.models.unet, s.noise_schedule, *in, gen, recipe).item<double>();
        count += static_cast<double>(in->latents.size(0));
      }
    }
    s.optimizer->use_train_weights();
  }
  // Ranks with more batches arrive later than a training collective may take: as the sample
  // images' barrier, the wait is bounded by the rendezvous timeout.
  s.comm.set_timeout(std::chrono::seconds(config_.cluster.rendezvous_timeout_seconds));
  const std::vector<double> sums = allreduce_scalars(s.comm, {loss_sum, count}, s.params);
  s.comm.set_timeout(std::chrono::seconds(config_.cluster.collective_timeout));
  ValidationResult r;
  r.timesteps = static_cast<int>(timesteps_.size());
  r.images = r.timesteps > 0 ? static_cast<std::int64_t>(sums[1] / r.timesteps + 0.5) : 0;
  r.loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace lf
