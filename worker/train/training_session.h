// Everything one rank trains with, set up once and in data-flow order: the output folder and
// resume checks (before any model loads), the frozen base model on the device, the LoRA network
// (rank 0's init broadcast to all), the optimizer and its lr groups, the restored position, and
// the data side (dataset, tokenizer, text encoders, latent and text caches). The training loop
// (trainer.h) and one optimizer step (train_one_step.h) read and update it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "common/config/job_config.h"
#include "common/data/dataset.h"
#include "common/text/clip_tokenizer.h"
#include "worker/core/lora/lora_network.h"
#include "worker/core/offload/weight_streamer.h"
#include "worker/core/train/loss_scaler.h"
#include "worker/core/train/lr_schedule.h"
#include "worker/core/train/noise_schedule.h"
#include "worker/core/train/optimizer.h"
#include "worker/core/train/precision.h"
#include "worker/core/train/train_step.h"
#include "worker/dist/communicator.h"
#include "worker/io/checkpoint.h"
#include "worker/rpc/coordinator_client.h"
#include "worker/train/base_model.h"
#include "worker/train/latent_cache.h"
#include "worker/train/phase_memory.h"
#include "worker/train/text_cache.h"
#include "worker/train/text_encoder_stack.h"

namespace lf {

struct ResumePoint;

class TrainingSession {
 public:
  // Runs every setup stage on `device` (the launch environment's choice). Collective: every
  // rank constructs its session at the same time (the LoRA init is broadcast, disk caches are
  // filled by all ranks). Throws std::runtime_error naming the file or key on bad input (an
  // existing run in output_dir, a checkpoint of another job, a missing base model),
  // CoordinatorError when the coordinator fails, and whatever a collective throws.
  TrainingSession(const JobConfig& config, const JobAssignment& job, Communicator& comm,
                  CoordinatorClient& coordinator, at::Device device);
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // The learning rate reported for a step at schedule factor `factor`: the UNet group's, or the
  // text encoders' when only they train.
  double reported_lr(double factor) const;
  // The schedule position of the next step: the steps that updated the LoRA so far (skipped
  // fp16 steps do not advance the LR schedule, as accelerate's scheduler does not).
  std::int64_t schedule_step() const { return state.global_step - state.skipped_steps; }

  const JobConfig& config;
  const JobAssignment& job;
  Communicator& comm;
  CoordinatorClient& coordinator;
  const at::Device device;
  const int rank;
  const int world_size;
  const Precision precision;  // dtypes of the run (training.mixed_precision and friends)
  PhaseMemory memory;         // peak memory of model load, caches, training

  std::string resume_dir;  // the checkpoint resumed from ("" for a fresh run)
  BaseModel base;          // frozen, eval mode, on `device`
  std::unique_ptr<LoRANetwork> lora;
  std::vector<at::Tensor> params;         // lora->parameters(), the optimizer's order
  std::vector<std::string> param_names;   // lora->parameter_names()
  bool train_unet = true;                 // the UNet part of the LoRA trains
  bool train_text_encoder = false;        // text-encoder modules exist (their outputs change)
  double unet_lr = 0.0;                   // kohya's unet_lr group (learning_rate when unset)
  double text_encoder_lr = 0.0;           // kohya's text_encoder_lr group
  std::unique_ptr<LoRAOptimizer> optimizer;
  std::unique_ptr<LossScaler> loss_scaler;  // fp16 only
  TrainState state;  // where training stands: restored from the checkpoint or fresh

  Dataset dataset;
  std::unique_ptr<CLIPTokenizer> tokenizer;
  std::unique_ptr<TextEncoderStack> encoders;
  std::unique_ptr<TextCache> texts;  // null while the text encoders' LoRA trains
  std::unique_ptr<LatentCache> latents;
  DDPMNoiseSchedule noise_schedule;  // with kohya's zero_terminal_snr
  DiffusionRecipe recipe;            // kohya's noise, timestep and loss options
  LRScheduleOptions lr_schedule;  // base_lr 1: the factor each group's lr multiplies
  // worker.vram_budget_gb: streams the UNet blocks not kept resident (null: none). Declared
  // last, so it lets go of the blocks' hooks before the models go.
  std::unique_ptr<WeightStreamer> streamer;

 private:
  void load_model();
  void build_network(const ResumePoint* resume);
  void build_optimizer();
  void restore(std::unique_ptr<ResumePoint> resume);
  void prepare_data();
  void fill_caches();
};

}  // namespace lf
