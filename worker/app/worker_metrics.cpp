// Worker metrics (see header). samples_per_second is an exponential moving average (alpha 0.1)
// of local samples / step time, smoothing single slow steps as tqdm's rate does.
#include "worker/app/worker_metrics.h"

#include "common/metrics/exposer.h"
#include "common/metrics/registry.h"

#include <limits>

namespace lf {

namespace {
const std::vector<double> kSecondsBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                             1.0,   2.5,  5.0,   10.0, 30.0, 60.0};
}

WorkerMetrics::WorkerMetrics(int rank, const std::string& bind_address)
    : registry_(std::make_shared<metrics::Registry>()) {
  const std::map<std::string, std::string> labels = {{"rank", std::to_string(rank)}};
  global_step_ = &metrics::BuildGauge()
                      .Name("lorafleet_worker_global_step")
                      .Help("Optimizer steps completed by this worker")
                      .Register(*registry_)
                      .Add(labels);
  loss_ = &metrics::BuildGauge()
               .Name("lorafleet_worker_loss")
               .Help("Global mean loss of the last step")
               .Register(*registry_)
               .Add(labels);
  samples_per_second_ = &metrics::BuildGauge()
                             .Name("lorafleet_worker_samples_per_second")
                             .Help("Samples per second processed by this rank (moving average)")
                             .Register(*registry_)
                             .Add(labels);
  step_seconds_last_ = &metrics::BuildGauge()
                            .Name("lorafleet_worker_last_step_seconds")
                            .Help("Wall time of the last optimizer step")
                            .Register(*registry_)
                            .Add(labels);
  samples_total_ = &metrics::BuildCounter()
                        .Name("lorafleet_worker_samples_total")
                        .Help("Samples processed by this rank")
                        .Register(*registry_)
                        .Add(labels);
  steps_total_ = &metrics::BuildCounter()
                      .Name("lorafleet_worker_steps_total")
                      .Help("Optimizer steps run by this process")
                      .Register(*registry_)
                      .Add(labels);
  skipped_steps_total_ = &metrics::BuildCounter()
                              .Name("lorafleet_worker_skipped_steps_total")
                              .Help(
                                  "Optimizer steps this process skipped by fp16 loss scaling "
                                  "(Inf/NaN gradients on some "
                                  "rank)")
                              .Register(*registry_)
                              .Add(labels);
  loss_scale_ = &metrics::BuildGauge()
                     .Name("lorafleet_worker_loss_scale")
                     .Help("fp16 dynamic loss scale after the last step (0 without fp16)")
                     .Register(*registry_)
                     .Add(labels);
  grad_norm_ = &metrics::BuildGauge()
                    .Name("lorafleet_worker_grad_norm")
                    .Help("Global LoRA gradient norm of the last step, before clipping")
                    .Register(*registry_)
                    .Add(labels);
  validation_loss_ = &metrics::BuildGauge()
                          .Name("lorafleet_worker_validation_loss")
                          .Help(
                              "The last validation loss (held-out images at fixed timesteps and "
                              "noise; NaN before the first)")
                          .Register(*registry_)
                          .Add(labels);
  validation_loss_->Set(std::numeric_limits<double>::quiet_NaN());
  step_seconds_ = &metrics::BuildHistogram()
                       .Name("lorafleet_worker_step_seconds")
                       .Help("Wall time per optimizer step, data wait included")
                       .Register(*registry_)
                       .Add(labels, kSecondsBuckets);
  allreduce_seconds_ = &metrics::BuildHistogram()
                            .Name("lorafleet_worker_allreduce_seconds")
                            .Help("Time in the fused gradient allreduce per step")
                            .Register(*registry_)
                            .Add(labels, kSecondsBuckets);
  data_wait_seconds_ = &metrics::BuildHistogram()
                            .Name("lorafleet_worker_data_wait_seconds")
                            .Help("Time waiting for data (plan fetch, decode, VAE encode) per step")
                            .Register(*registry_)
                            .Add(labels, kSecondsBuckets);
  if (!bind_address.empty()) {
    exposer_ = std::make_unique<metrics::Exposer>(bind_address);
    exposer_->RegisterCollectable(registry_);
  }
}

WorkerMetrics::~WorkerMetrics() = default;

void WorkerMetrics::observe_step(const StepReport& r) {
  global_step_->Set(static_cast<double>(r.global_step));
  loss_->Set(r.loss);
  step_seconds_last_->Set(r.step_seconds);
  samples_total_->Increment(r.local_samples);
  steps_total_->Increment();
  if (r.skipped) skipped_steps_total_->Increment();
  loss_scale_->Set(r.loss_scale);
  grad_norm_->Set(r.grad_norm);
  step_seconds_->Observe(r.step_seconds);
  allreduce_seconds_->Observe(r.allreduce_seconds);
  data_wait_seconds_->Observe(r.data_wait_seconds);
  if (r.step_seconds > 0) {
    const double rate = r.local_samples / r.step_seconds;
    ema_samples_per_second_ =
        ema_samples_per_second_ == 0.0 ? rate : 0.9 * ema_samples_per_second_ + 0.1 * rate;
    samples_per_second_->Set(ema_samples_per_second_);
  }
}

void WorkerMetrics::observe_validation(const ValidationReport& report) {
  validation_loss_->Set(report.loss);
}

int WorkerMetrics::port() const { return exposer_ ? exposer_->port() : 0; }

std::string WorkerMetrics::serialize() const { return registry_->Serialize(); }

}  // namespace lf
