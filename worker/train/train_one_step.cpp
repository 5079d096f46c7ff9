// One optimizer step (see header).
#include "worker/train/train_one_step.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "common/config/job_config.h"
#include "common/util/elapsed.h"
#include "common/util/log.h"
#include "worker/core/lora/max_norm.h"
#include "worker/core/model/lora_dropout.h"
#include "worker/core/train/autocast.h"
#include "worker/core/train/grad_clip.h"
#include "worker/core/train/optimizer.h"
#include "worker/core/train/train_step.h"
#include "worker/dist/parameter_sync.h"
#include "worker/train/rng_streams.h"
#include "worker/train/step_inputs.h"

namespace lf {
namespace {

// Before the first update the LoRA is a no-op (lora_up is zero), so a non-finite loss then comes
// from the base model or the data, not from the learning rate. The step is named as the one it
// would have completed, like the fp16 skip message and the sync-check log. A ConfigError (exit 3,
// not retried): a restart resumes the same bytes and meets the same loss.
[[noreturn]] void throw_non_finite_loss(const TrainingSession& s, double loss) {
  const bool untouched =
      s.state.global_step == 0 && s.config.network.network_weights.empty();
  const std::string value = std::isnan(loss) ? "NaN" : loss > 0 ? "Inf" : "-Inf";
  throw ConfigError(
      s.config.source_name + ": loss is " + value + " at global_step " +
      std::to_string(s.state.global_step + 1) +
      (untouched ? " before any update: the base checkpoint (" +
                       s.config.model.pretrained_model_name_or_path +
                       ") or the latents hold NaN/Inf; check the file, or use an fp32/bf16 copy "
                       "if an fp16 VAE overflows"
                 : " (try a lower training.learning_rate)"));
}

// The step's micro-batches: inputs, noise, loss / global_samples, backward (scaled by the fp16
// loss scale). Returns this rank's unscaled loss sum.
double forward_backward(TrainingSession& s, const EpochPlan& plan, std::int64_t begin,
                        std::int64_t end, SampleLog& sample_log, StepResult& r) {
  const TrainState& state = s.state;
  const double loss_scale = s.loss_scaler ? s.loss_scaler->scale() : 1.0;
  double local_loss_sum = 0.0;
  for (std::int64_t k = begin; k < end; ++k) {
    at::Tensor loss_sum;
    // kohya's network_dropout / rank_dropout / module_dropout: this micro-batch's own stream,
    // in the text encoders' and the UNet's forward (and their checkpoint recomputes).
    std::optional<LoRADropoutScope> dropout;
    if (s.lora->options().dropout.any()) {
      dropout.emplace(
          make_lora_dropout_generator(s.job.shared_seed, s.rank, state.global_step, k - begin));
    }
    {
      // kohya's accelerator.autocast(): the text encoders (while they train) and the UNet.
      AutocastScope amp(s.device.type(), s.precision.weight_dtype, s.precision.autocast);
      const auto data_t0 = SteadyClock::now();
      std::optional<StepInputs> in =
          build_step_inputs(plan.batches[k], s.rank, *s.latents, s.texts.get(), *s.encoders,
                            s.base.models.preset, s.dataset, s.device, s.precision.weight_dtype);
      r.data_wait_seconds += seconds_since(data_t0);
      if (!in) continue;  // the last batch of a bucket may leave a rank without samples
      if (sample_log.enabled()) {
        const auto [lo, hi] = rank_slice(plan.batches[k], s.rank);
        for (int i = lo; i < hi; ++i) {
          sample_log.write(state.global_step + 1, state.epoch, k, plan.batches[k].samples[i],
                           r.lr);
        }
      }
      r.local_samples += static_cast<int>(in->latents.size(0));
      auto gen = make_noise_generator(s.job.shared_seed, s.rank, state.global_step, k - begin);
      loss_sum = compute_loss_sum(s.base.models.unet, s.noise_schedule, *in, gen, s.recipe);
    }
    if (s.loss_scaler) {
      ((loss_sum / r.global_samples) * loss_scale).backward();  // GradScaler.scale(loss)
    } else {
      (loss_sum / r.global_samples).backward();
    }
    local_loss_sum += loss_sum.item<double>();
  }
  return local_loss_sum;
}

// The test hook: an Inf in this rank's first LoRA gradient at the chosen step.
void inject_nonfinite(const TrainingSession& s, const NonFiniteInjection& inject) {
  if (inject.rank != s.rank || inject.global_step != s.state.global_step + 1) return;
  for (const auto& p : s.params) {
    if (!p.grad().defined()) continue;
    torch::NoGradGuard no_grad;
    p.grad().view({-1})[0] = std::numeric_limits<float>::infinity();
    return;
  }
}

}  // namespace

StepResult train_one_step(TrainingSession& s, const EpochPlan& plan, std::int64_t begin,
                          std::int64_t end, const StepHooks& hooks, SampleLog& sample_log) {
  StepResult r;
  // One optimizer step = the next `accum` global batches (fewer at the end of an epoch, as
  // accelerate steps on the dataloader's last batch). Their gradients are summed locally and
  // reduced once, weighted so the result is the mean over all their samples (accelerate
  // divides by accum instead: the same whenever the batches are full).
  for (std::int64_t k = begin; k < end; ++k) r.global_samples += plan.batches[k].samples.size();
  const double lr_factor = lr_at_step(s.lr_schedule, s.schedule_step());
  r.lr = s.reported_lr(lr_factor);
  if (s.train_unet) r.part_lrs.push_back({"unet", lr_factor * s.unet_lr, lr_factor * s.unet_lr});
  if (s.train_text_encoder) {
    const double lr = lr_factor * s.text_encoder_lr;
    r.part_lrs.push_back({"textencoder", lr, lr});
  }
  s.optimizer->zero_grad();
  const double local_loss_sum = forward_backward(s, plan, begin, end, sample_log, r);
  if (hooks.inject_nonfinite) inject_nonfinite(s, *hooks.inject_nonfinite);

  const auto allreduce_t0 = SteadyClock::now();
  StepSums sums;
  sums.loss_sum = local_loss_sum;
  sums.votes = hooks.votes ? hooks.votes() : StepVotes{};
  sums.check_finite = s.loss_scaler != nullptr;
  const bool finite = allreduce_gradients(
      s.comm, s.params, sums, s.loss_scaler ? s.loss_scaler->inverse_scale() : 1.0);
  r.allreduce_seconds = seconds_since(allreduce_t0);
  r.votes = *sums.votes;
  r.loss = sums.loss_sum / r.global_samples;
  if (!s.loss_scaler && !std::isfinite(r.loss)) throw_non_finite_loss(s, r.loss);
  if (s.loss_scaler && !finite) {
    // GradScaler.step skips optimizer.step: the LoRA and the optimizer state stay as they were,
    // on every rank (the flag came through the allreduce).
    r.skipped = true;
    r.nonfinite_ranks = sums.nonfinite_ranks;
    s.optimizer->zero_grad();
  } else {
    if (s.config.training.max_grad_norm > 0) {
      r.grad_norm = clip_grad_norm(s.params, s.config.training.max_grad_norm);
    }
    s.optimizer->step(lr_factor);
    r.lr = s.optimizer->logged_lr(r.lr);  // kohya logs d*lr for Prodigy / D-Adaptation
    for (PartLearningRate& part : r.part_lrs) part.logged_lr = s.optimizer->logged_lr(part.lr);
    // kohya --scale_weight_norms (0 is off, as kohya's truthiness test): every rank holds the
    // same weights, so every rank scales the same modules.
    if (s.config.training.scale_weight_norms.value_or(0) > 0) {
      const MaxNormReport m =
          apply_max_norm_regularization(*s.lora, *s.config.training.scale_weight_norms);
      if (s.rank == 0 && m.keys_scaled > 0) {
        LF_INFO("scale_weight_norms: global_step "
                << s.state.global_step + 1 << ": " << m.keys_scaled << " modules scaled, mean "
                << "key norm " << m.mean_norm << ", max " << m.max_norm);
      }
    }
  }
  if (s.loss_scaler) {
    const double before = s.loss_scaler->scale();
    s.loss_scaler->update(r.skipped);
    s.state.loss_scale = r.loss_scale = s.loss_scaler->scale();
    s.state.loss_scale_growth_tracker = s.loss_scaler->growth_tracker();
    if (r.skipped) {
      s.state.skipped_steps += 1;
      if (s.rank == 0) {
        LF_WARN("fp16 loss scaling: global_step " << s.state.global_step + 1
                                                  << " skipped (Inf/NaN gradients on "
                                                  << r.nonfinite_ranks << " rank(s)); scale "
                                                  << before << " -> " << r.loss_scale << ", "
                                                  << s.state.skipped_steps << " skipped so far");
      }
    }
  }
  sample_log.flush();
  return r;
}

}  // namespace lf
