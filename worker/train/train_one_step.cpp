// One optimizer step (see header).
#include "worker/train/train_one_step.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <string>

#include "common/util/elapsed.h"
#include "worker/core/train/optimizer.h"
#include "worker/core/train/train_step.h"
#include "worker/dist/parameter_sync.h"
#include "worker/train/rng_streams.h"
#include "worker/train/step_inputs.h"

namespace lf {
namespace {

// Before the first update the LoRA is a no-op (lora_up is zero), so a non-finite loss then comes
// from the base model or the data, not from the learning rate.
[[noreturn]] void throw_non_finite_loss(const TrainingSession& s, double loss) {
  const bool untouched =
      s.state.global_step == 0 && s.config.network.network_weights.empty();
  throw std::runtime_error(
      "loss is " + std::to_string(loss) + " at global_step " +
      std::to_string(s.state.global_step) +
      (untouched ? " before any update: the base checkpoint (" +
                       s.config.model.pretrained_model_name_or_path +
                       ") or the latents hold NaN/Inf; check the file, or use an fp32/bf16 copy "
                       "if an fp16 VAE overflows"
                 : " (try a lower training.learning_rate)"));
}

}  // namespace

StepResult train_one_step(TrainingSession& s, const EpochPlan& plan, std::int64_t begin,
                          std::int64_t end, const std::function<bool()>& stop_requested,
                          SampleLog& sample_log) {
  const TrainState& state = s.state;
  StepResult r;
  // One optimizer step = the next `accum` global batches (fewer at the end of an epoch, as
  // accelerate steps on the dataloader's last batch). Their gradients are summed locally and
  // reduced once, weighted so the result is the mean over all their samples (accelerate
  // divides by accum instead: the same whenever the batches are full).
  for (std::int64_t k = begin; k < end; ++k) r.global_samples += plan.batches[k].samples.size();
  const double lr_factor = lr_at_step(s.lr_schedule, state.global_step);
  r.lr = s.reported_lr(lr_factor);
  s.optimizer->zero_grad();
  double local_loss_sum = 0.0;
  for (std::int64_t k = begin; k < end; ++k) {
    const auto data_t0 = SteadyClock::now();
    std::optional<StepInputs> in =
        build_step_inputs(plan.batches[k], s.rank, *s.latents, s.texts.get(), *s.encoders,
                          s.base.models.preset, s.dataset, s.device);
    r.data_wait_seconds += seconds_since(data_t0);
    if (!in) continue;  // the last batch of a bucket may leave a rank without samples
    if (sample_log.enabled()) {
      const auto [lo, hi] = rank_slice(plan.batches[k], s.rank);
      for (int i = lo; i < hi; ++i) {
        sample_log.write(state.global_step + 1, state.epoch, k, plan.batches[k].samples[i], r.lr);
      }
    }
    r.local_samples += static_cast<int>(in->latents.size(0));
    auto gen = make_noise_generator(s.job.shared_seed, s.rank, state.global_step, k - begin);
    at::Tensor loss_sum = compute_loss_sum(s.base.models.unet, s.noise_schedule, *in, gen,
                                           s.config.model.v_parameterization);
    (loss_sum / r.global_samples).backward();
    local_loss_sum += loss_sum.item<double>();
  }
  const auto allreduce_t0 = SteadyClock::now();
  r.stop_votes = stop_requested && stop_requested() ? 1.0 : 0.0;
  const double loss =
      allreduce_gradients(s.comm, s.params, local_loss_sum, &r.stop_votes) / r.global_samples;
  r.allreduce_seconds = seconds_since(allreduce_t0);
  if (!std::isfinite(loss)) throw_non_finite_loss(s, loss);
  r.loss = loss;
  if (s.config.training.max_grad_norm > 0) {
    clip_grad_norm(s.params, s.config.training.max_grad_norm);
  }
  s.optimizer->step(lr_factor);
  sample_log.flush();
  return r;
}

}  // namespace lf
