// Training loop (see header). Order of one step, identical on every rank:
//   slice of the global batch → cached latents/contexts → noise + timesteps from the
//   (seed, rank, global_step) stream → loss_sum / B_global → backward → one fused allreduce of
//   [all LoRA grads | loss_sum] → grad-norm clip → AdamW at lr(global_step) → global_step++.
#include "worker/train/trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "common/io/atomic_file.h"
#include "common/data/size_conditioning.h"
#include "common/io/safetensors.h"
#include "common/io/sha256.h"
#include "common/text/clip_tokenizer.h"
#include "common/util/log.h"
#include "common/util/wall_clock.h"
#include "worker/app/progress_bar.h"
#include "worker/app/worker_metrics.h"
#include "worker/core/lora/lora_network.h"
#include "worker/core/model/clip_text_model.h"
#include "worker/core/model/model_config.h"
#include "worker/core/model/state_dict.h"
#include "worker/core/model/unet.h"
#include "worker/core/model/vae_encoder.h"
#include "worker/core/train/lr_schedule.h"
#include "worker/core/train/noise_schedule.h"
#include "worker/core/train/optimizer.h"
#include "worker/core/train/train_step.h"
#include "worker/dist/parameter_sync.h"
#include "worker/io/checkpoint.h"
#include "worker/io/lora_file.h"
#include "worker/io/tensor_file.h"
#include "worker/train/base_model.h"
#include "worker/train/checkpoint_writer.h"
#include "worker/train/latent_cache.h"
#include "worker/train/model_identity.h"
#include "worker/train/rng_streams.h"
#include "worker/train/sample_log.h"
#include "worker/train/text_cache.h"
#include "worker/train/text_encoder_stack.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

at::Device pick_device(const JobConfig& config, int rank) {
  const std::string& want = config.worker.device;
  const bool cuda = torch_cuda_available();
  if (want == "cuda" && !cuda) {
    throw std::runtime_error("worker.device: cuda requested but no CUDA device is visible");
  }
  if (want == "cpu" || !cuda) return at::Device(at::kCPU);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(cuda_device_for_rank(rank)));
}

// Identity of a frozen model for cache keys: a digest of all its weights (model_identity.h).
std::string weights_identity(const torch::nn::Module& module) {
  const WeightMap w = module_weights(module, "");
  return module_identity(std::map<std::string, at::Tensor>(w.begin(), w.end()));
}

// dataset.cache_dir, or <output_dir>/cache when it is not set.
std::string cache_dir_of(const JobConfig& config) {
  return config.dataset.cache_dir.empty()
             ? (fs::path(config.output.output_dir) / "cache").string()
             : config.dataset.cache_dir;
}

// A fresh run must not write over another run's checkpoints.
void refuse_existing_checkpoints(const fs::path& out_dir) {
  const fs::path root = out_dir / "checkpoints";
  if (!fs::is_directory(root)) return;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.path().filename().string().rfind("step-", 0) == 0) {
      throw std::runtime_error(
          "output.output_dir " + out_dir.string() + " already holds checkpoints (" +
          e.path().string() + "); pass --resume " + out_dir.string() +
          " to continue that run, or choose another output_dir (nothing was overwritten)");
    }
  }
}

// A checkpoint to continue from, checked against this job before any model is loaded.
struct ResumePoint {
  std::string dir;
  TrainState state;
};

// The per-dataset batch sizes of this job, as the checkpoint records them.
std::vector<std::int64_t> batch_sizes_of(const JobConfig& config) {
  std::vector<std::int64_t> out;
  for (const DatasetConfig& d : config.datasets) out.push_back(d.batch_size);
  return out;
}

// The checkpoint the coordinator chose for the group (it may have been written by another
// number of ranks: the coordinator replanned the rest of the job for this one).
ResumePoint open_resume_point(const JobAssignment& job, const JobConfig& config) {
  ResumePoint point;
  point.dir = resolve_checkpoint(job.resume.checkpoint);
  point.state = load_train_state(point.dir);
  const TrainState& s = point.state;
  if (s.shared_seed != job.shared_seed) {
    throw std::runtime_error(point.dir + ": checkpoint was trained with seed " +
                             std::to_string(s.shared_seed) + ", the job has seed " +
                             std::to_string(job.shared_seed));
  }
  if (s.global_step != job.resume.global_step || s.epoch != job.resume.epoch ||
      s.step_in_epoch != job.resume.batches_in_epoch) {
    throw std::runtime_error(point.dir + ": the coordinator planned a resume at global_step " +
                             std::to_string(job.resume.global_step) + " but the checkpoint is "
                             "at global_step " + std::to_string(s.global_step) +
                             " (was it replaced meanwhile?)");
  }
  // Older checkpoints lack these (0 / empty): nothing to compare then.
  if (s.gradient_accumulation_steps != 0 &&
      s.gradient_accumulation_steps != config.training.gradient_accumulation_steps) {
    throw std::runtime_error(point.dir + ": checkpoint was trained with "
                             "training.gradient_accumulation_steps " +
                             std::to_string(s.gradient_accumulation_steps) + ", the job has " +
                             std::to_string(config.training.gradient_accumulation_steps) +
                             " (changing it would regroup the epoch and change the schedule)");
  }
  if (!s.batch_sizes.empty() && s.batch_sizes != batch_sizes_of(config)) {
    auto list = [](const std::vector<std::int64_t>& v) {
      std::string out;
      for (std::int64_t x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
      return "[" + out + "]";
    };
    throw std::runtime_error(point.dir + ": checkpoint was trained with per-dataset batch sizes " +
                             list(s.batch_sizes) + ", the job has " +
                             list(batch_sizes_of(config)) +
                             " (changing them would change the epoch plan)");
  }
  return point;
}

// Restores LoRA weights and optimizer state from `point`; returns the position to continue at.
TrainState apply_resume_point(ResumePoint point, const JobAssignment& job, int rank,
                              LoRANetwork& lora, LoRAOptimizer& optimizer,
                              const std::vector<std::string>& param_names) {
  const std::string& dir = point.dir;
  TrainState& state = point.state;
  LoadedTensors weights = load_safetensors(dir + "/lora.safetensors");
  lora.load_state_dict(std::map<std::string, at::Tensor>(weights.tensors.begin(),
                                                         weights.tensors.end()));
  optimizer.load_state_dict(state.optimizer, param_names);
  state.optimizer.clear();
  // The noise stream is a pure function of (seed, rank, step); the saved generator state must
  // equal it, else the checkpoint came from a different stream layout.
  if (auto saved = load_rng_state(dir, rank)) {
    auto expect = make_noise_generator(job.shared_seed, rank, state.global_step);
    if (!torch::equal(saved->to(at::kByte), expect.get_state())) {
      throw std::runtime_error(dir + ": RNG state of rank " + std::to_string(rank) +
                               " does not match this version's noise stream");
    }
  }
  if (rank == 0) {
    LF_INFO("resumed from " << dir << " at global_step " << state.global_step << ", epoch "
                            << state.epoch + 1 << ", batch " << state.step_in_epoch);
  }
  return state;
}

// This rank's slice of a global batch as model inputs: cached latents (and alpha masks), the
// text conditioning of each sample's caption (from the cache, or run through the text encoders
// with gradients when their LoRA trains), SDXL's vector conditioning from the pooled text
// embedding and the sample's real size / crop, and the loss weights. nullopt when the slice is
// empty (the last batch of a bucket may leave some ranks without samples).
std::optional<StepInputs> local_inputs(const GlobalBatch& batch, int rank, LatentCache& latents,
                                       TextCache* texts, TextEncoderStack& encoders,
                                       const ModelPreset& preset, const Dataset& dataset,
                                       at::Device device) {
  const auto [lo, hi] = rank_slice(batch, rank);
  if (hi <= lo) return std::nullopt;
  std::vector<at::Tensor> lat, ctx, pooled, masks;
  std::vector<std::string> captions;
  std::vector<float> weights, size_cond;
  bool any_mask = false;
  for (int i = lo; i < hi; ++i) {
    const PlanSample& smp = batch.samples[i];
    const ImageRecord& image = dataset.images[smp.image_index];
    LatentCache::Entry e = latents.get(smp.image_index, smp.crop_flip);
    any_mask = any_mask || e.mask.defined();
    lat.push_back(e.latents);
    masks.push_back(e.mask);
    // A shuffled / dropped-out caption comes with the sample; the base caption is cached.
    const std::string& caption = smp.has_caption ? smp.caption : image.caption;
    if (texts) {
      const TextConditioning c = smp.has_caption ? texts->encode(caption) : texts->get(caption);
      ctx.push_back(c.context);
      if (c.pooled.defined()) pooled.push_back(c.pooled);
    } else {
      captions.push_back(caption);
    }
    if (preset.unet.adm_in_channels > 0) {
      const std::array<float, 6> sc = sdxl_size_conditioning(image, smp.crop_flip);
      size_cond.insert(size_cond.end(), sc.begin(), sc.end());
    }
    weights.push_back(smp.loss_weight);
  }
  StepInputs in;
  in.latents = torch::stack(lat);
  at::Tensor pooled_batch;
  if (texts) {
    in.context = torch::stack(ctx);
    if (!pooled.empty()) pooled_batch = torch::stack(pooled);
  } else {
    // Text-encoder LoRA trains: one batched forward with gradients.
    TextConditioning c = encoders.encode(captions, device);
    in.context = c.context;
    pooled_batch = c.pooled;
  }
  if (preset.unet.adm_in_channels > 0) {
    const auto n = static_cast<int64_t>(weights.size());
    at::Tensor sizes = torch::tensor(size_cond).view({n, 6}).to(device);
    in.vector_cond =
        sdxl_vector_conditioning(pooled_batch, sizes, preset.unet.adm_time_embed_dim);
  }
  in.loss_weights = torch::tensor(weights).to(device);
  if (any_mask) {  // alpha_mask samples weight their loss; the others get an all-ones mask
    for (std::size_t k = 0; k < masks.size(); ++k) {
      if (!masks[k].defined()) {
        masks[k] = torch::ones({1, lat[k].size(1), lat[k].size(2)}, lat[k].options());
      }
    }
    in.loss_mask = torch::stack(masks);
  }
  return in;
}

// Identity of the text encoders for the text-output disk cache: every encoder's weights and the
// layer each returns.
std::string text_encoders_identity(TextEncoderStack& encoders) {
  std::string id;
  for (auto& te : encoders.encoders()) id += weights_identity(*te) + ";";
  return sha256_hex(id + "layers=" + encoders.layer_rendering());
}

}  // namespace

bool torch_cuda_available() { return torch::cuda::is_available(); }

int cuda_device_for_rank(int rank) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (local == nullptr) local = std::getenv("LF_LOCAL_RANK");
  if (local == nullptr) local = std::getenv("LOCAL_RANK");
  const int local_rank = local ? std::atoi(local) : rank;
  const int count = static_cast<int>(torch::cuda::device_count());
  return count > 0 ? local_rank % count : 0;
}

TrainResult run_training(const JobConfig& config, const JobAssignment& job, Communicator& comm,
                         CoordinatorClient& coordinator, const TrainerOptions& options) {
  const int rank = comm.rank();
  const int world_size = comm.world_size();
  const auto& tr = config.training;
  const at::Device device = pick_device(config, rank);
  torch::set_num_threads(std::max(1, config.worker.num_threads));
  comm.set_timeout(std::chrono::seconds(config.cluster.rendezvous_timeout_seconds));

  // Cheap checks on the output folder and the resume point first, before the model loads.
  const fs::path out_dir(config.output.output_dir);
  std::optional<ResumePoint> resume_point;
  if (job.resume.checkpoint.empty()) {
    refuse_existing_checkpoints(out_dir);
  } else {
    // The coordinator already checked that its plan of the checkpoint's epoch is the one the
    // checkpoint was trained on (plan_digest), before any rank loads a model.
    resume_point = open_resume_point(job, config);
  }
  const std::string resume_dir = resume_point ? resume_point->dir : "";

  // ---- Model: the base checkpoint through the same loader real checkpoints use. ----
  const std::string& ckpt = config.model.pretrained_model_name_or_path;
  if (!fs::exists(ckpt)) {
    throw std::runtime_error("model.pretrained_model_name_or_path: " + ckpt +
                             " does not exist (expected a single-file .safetensors checkpoint)");
  }
  BaseModel base = load_base_model(config.model);
  SDModels& models = base.models;
  const ModelPreset& preset = models.preset;
  UNetModel& unet = models.unet;
  VAEEncoder& vae = models.vae_encoder;
  std::vector<torch::nn::Module*> frozen = {unet.get(), vae.get()};
  for (auto& te : models.text_encoders) frozen.push_back(te.get());
  for (torch::nn::Module* m : frozen) {
    freeze_parameters(*m);
    m->eval();
    m->to(device);
  }
  if (rank == 0) LF_INFO("loaded " << ckpt << " on " << device.str() << ": " << base.summary);
  if (rank == 0 && config.model.v_parameterization && preset.family != ModelFamily::kSD2) {
    // As kohya: v-prediction is an SD 2.x (768-v) convention; elsewhere it is usually a mistake.
    LF_WARN("model.v_parameterization is set for a " << family_name(preset.family)
                                                      << " model; v-prediction base models are "
                                                         "SD 2.x 768-v");
  }
  const bool sdxl = preset.family == ModelFamily::kSDXL;
  const auto& net = config.network;

  // ---- LoRA: rank 0's initial weights are broadcast so every rank starts identical. ----
  auto init_gen = make_cpu_generator(lora_init_seed(tr.seed));
  LoRANetworkOptions lora_options;
  lora_options.network_dim = net.network_dim;
  lora_options.network_alpha = net.network_alpha;
  lora_options.conv_dim = net.conv_dim;
  lora_options.conv_alpha = net.conv_alpha;
  // kohya: a part whose own lr is set to 0 is not trained (no modules, the text cache stays on).
  lora_options.train_unet =
      !net.network_train_text_encoder_only && !(net.unet_lr && *net.unet_lr == 0);
  lora_options.train_text_encoder =
      !net.network_train_unet_only && !(net.text_encoder_lr && *net.text_encoder_lr == 0);
  if (resume_point && lora_options.train_text_encoder) {
    // A checkpoint without text-encoder modules (network_train_unet_only, or lorafleet before
    // text-encoder LoRA became the default) resumes as it was trained, not with a new network.
    const SafetensorsFile saved = SafetensorsFile::open(resume_point->dir + "/lora.safetensors");
    const bool has_te =
        std::any_of(saved.tensors().begin(), saved.tensors().end(),
                    [](const TensorInfo& t) { return t.name.rfind("lora_te", 0) == 0; });
    if (!has_te) {
      lora_options.train_text_encoder = false;
      if (rank == 0) {
        LF_WARN(resume_point->dir << " was trained without text-encoder LoRA modules; resuming "
                                     "it UNet-only (set network.network_train_unet_only: true "
                                     "to say so)");
      }
    }
  }
  // Adapters are created on each target layer's device (the models are already there).
  LoRANetwork lora(unet, unet_lora_naming(unet, /*ldm_names=*/sdxl),
                   kohya_text_encoder_targets(models), lora_options, init_gen);
  if (!net.network_weights.empty()) {
    const LoRALoadReport report = load_network_weights(lora, net.network_weights);
    if (rank == 0) {
      LF_INFO("network_weights " << net.network_weights << ": " << report.loaded_modules
                                 << " modules loaded (" << report.variants << ")");
      if (!report.missing_modules.empty()) {
        LF_WARN("network_weights: " << report.missing_modules.size()
                                    << " modules of this network are not in the file and keep "
                                       "their fresh init, e.g. "
                                    << report.missing_modules.front());
      }
    }
  }
  const std::vector<at::Tensor> params = lora.parameters();
  broadcast_parameters(comm, params, 0);
  const std::size_t te_modules = lora.text_encoder_parameters().size() / 2;
  if (rank == 0) {
    LF_INFO("LoRA: " << lora.module_names().size() << " modules (" << te_modules
                     << " on the text encoders), network_dim " << net.network_dim
                     << ", network_alpha " << net.network_alpha
                     << (net.conv_dim > 0 ? ", conv_dim " + std::to_string(net.conv_dim) : "")
                     << ", " << lora.num_parameters() << " parameters");
  }
  const bool train_text_encoder = te_modules > 0;

  AdamWOptions adam;
  adam.beta1 = tr.adam_beta1;
  adam.beta2 = tr.adam_beta2;
  adam.eps = tr.adam_epsilon;
  adam.weight_decay = tr.adam_weight_decay;
  // kohya's unet_lr / text_encoder_lr: one schedule, each group's lr a multiple of its factor.
  const double unet_lr = net.unet_lr.value_or(tr.learning_rate);
  const double text_encoder_lr = net.text_encoder_lr.value_or(tr.learning_rate);
  std::vector<double> lr_of_param(params.size(), unet_lr);
  {
    std::set<const void*> te_params;
    for (const auto& p : lora.text_encoder_parameters()) te_params.insert(p.unsafeGetTensorImpl());
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (te_params.count(params[i].unsafeGetTensorImpl())) lr_of_param[i] = text_encoder_lr;
    }
  }
  LoRAOptimizer optimizer(params, adam, lr_of_param);
  const std::vector<std::string> param_names = lora.parameter_names();

  // ---- Resume. ----
  TrainState state;
  if (!resume_point) {
    state.shared_seed = job.shared_seed;
    state.world_size = world_size;
    state.session_id = static_cast<std::int64_t>(mix_seed(job.shared_seed, job.generation, 7) >> 1);
    state.training_started_at = static_cast<double>(output_timestamp());
  } else {
    state = apply_resume_point(std::move(*resume_point), job, rank, lora, optimizer, param_names);
  }
  state.world_size = world_size;  // this group's, whoever wrote the checkpoint
  state.gradient_accumulation_steps = tr.gradient_accumulation_steps;
  state.batch_sizes = batch_sizes_of(config);

  // ---- Data. ----
  const Dataset dataset = coordinator.get_dataset();
  const CLIPTokenizer tokenizer = CLIPTokenizer::from_file(config.model.tokenizer_vocab);
  TextEncoderStack encoders(preset, models.text_encoders, tokenizer, tr.clip_skip);
  // Frozen text encoders: their outputs are cached per caption (kohya
  // cache_text_encoder_outputs); trained ones run every step.
  std::unique_ptr<TextCache> texts;
  if (!train_text_encoder) {
    TextCache::Options text_options;
    text_options.device = device;
    if (config.dataset.cache_text_encoder_outputs_to_disk) {
      text_options.disk_dir = (fs::path(cache_dir_of(config)) / "text").string();
      text_options.text_encoder_identity = text_encoders_identity(encoders);
      text_options.tokenizer_identity = sha256_file_hex(config.model.tokenizer_vocab);
    }
    texts = std::make_unique<TextCache>(encoders, text_options);
  }
  LatentCache::Options latent_options;
  latent_options.device = device;
  // Always: the VAE noise of an entry is seeded by its key, which holds the VAE's identity, so
  // a run with the disk cache and one without encode the very same latents.
  latent_options.vae_identity = weights_identity(*vae);
  if (config.dataset.cache_latents_to_disk) {
    latent_options.disk_dir = (fs::path(cache_dir_of(config)) / "latents").string();
  }
  LatentCache latents(dataset, latent_options,
                      [&](const at::Tensor& x, std::uint64_t noise_seed) {
                        torch::NoGradGuard no_grad;
                        auto gen = make_cpu_generator(noise_seed);
                        return vae->sample_latents(x, gen);
                      });
  if (config.dataset.cache_latents_to_disk) {
    // kohya cache_latents_to_disk: every rank encodes its share of the missing entries before
    // training, then all read every entry from disk.
    const auto t0 = Clock::now();
    const LatentCache::ShardStats st = latents.precompute_shard(rank, world_size);
    comm.barrier();
    LF_INFO("latent cache " << latent_options.disk_dir << ": " << st.encoded
                            << " encoded by this rank, " << st.reused << " reused, "
                            << st.stale << " stale re-encoded (" << seconds_since(t0) << " s)");
  }
  const DDPMNoiseSchedule schedule;
  LRScheduleOptions lr_opts;
  lr_opts.name = tr.lr_scheduler;
  lr_opts.base_lr = 1.0;  // the schedule's factor; each group's lr multiplies it
  lr_opts.warmup_steps = tr.lr_warmup_steps;
  lr_opts.total_steps = job.max_train_steps;

  WorkerMetrics metrics(rank, options.metrics_bind);
  if (!options.metrics_bind.empty()) {
    LF_INFO("metrics at http://" << config.worker.metrics_host << ":" << metrics.port()
                                 << "/metrics");
  }
  ProgressBar bar(job.max_train_steps, state.global_step, stdout, options.progress_tty);

  if (rank == 0) fs::create_directories(out_dir / "checkpoints");
  CheckpointWriter checkpoints{config, job,       dataset,     comm,
                               coordinator, lora, optimizer, param_names,
                               family_name(preset.family)};
  SampleLog sample_log(options.sample_log, rank);
  TrainResult result;
  std::int64_t local_samples_total = 0;
  EpochPlan plan;

  const std::int64_t stop_at = options.stop_at_step > 0
                                   ? std::min<std::int64_t>(options.stop_at_step, job.max_train_steps)
                                   : job.max_train_steps;
  // Setup collectives above waited as long as rendezvous allows (ranks load and cache at their
  // own pace); from here on every collective is one training step's.
  comm.set_timeout(std::chrono::seconds(config.cluster.collective_timeout));
  const auto loop_start = Clock::now();
  while (state.global_step < stop_at) {
    if (state.epoch >= job.num_epochs) {
      throw std::runtime_error("plan exhausted at epoch " + std::to_string(state.epoch) +
                               " before max_train_steps " + std::to_string(job.max_train_steps));
    }
    const auto plan_t0 = Clock::now();
    plan = coordinator.get_epoch_plan(state.epoch);
    double plan_wait = seconds_since(plan_t0);  // charged to the first step of the epoch
    // A resumed epoch must continue the reg walk exactly where the checkpoint left it.
    if (!state.reg_cursor.empty() && state.reg_cursor != plan.reg_cursor_begin) {
      throw std::runtime_error(
          "the plan of epoch " + std::to_string(state.epoch + 1) +
          " starts its regularization images elsewhere than the checkpoint recorded; the "
          "dataset or dataset.reg_selection changed since the checkpoint was written");
    }
    state.reg_cursor = plan.reg_cursor_begin;
    // This group's segment of the plan's lineage: a new epoch starts a new lineage; a group of
    // another size than the checkpoint's continues the plan it was served (the coordinator
    // continued it on this world size) in a segment of its own.
    if (state.step_in_epoch == 0) state.plan_lineage.clear();
    if (state.plan_lineage.empty() || state.plan_lineage.back().world_size != world_size) {
      state.plan_lineage.push_back({world_size, 0});
    }
    const auto num_batches = static_cast<std::int64_t>(plan.batches.size());
    if (rank == 0) {
      const std::int64_t accum_steps = tr.gradient_accumulation_steps;
      LF_INFO("epoch " << state.epoch + 1 << "/" << job.num_epochs << ": " << num_batches
                       << " batches, " << (num_batches + accum_steps - 1) / accum_steps
                       << " optimizer steps, " << plan.num_samples() << " samples ("
                       << plan.reg_indices.size() << " regularization from "
                       << plan.reg_images_used << " reg images, " << plan.reg_images_unused
                       << " not used this epoch)");
    }
    const std::int64_t accum = tr.gradient_accumulation_steps;
    for (std::int64_t b = state.step_in_epoch; b < num_batches && state.global_step < stop_at;) {
      // A newer generation formed without this rank (its peer was restarted): stop, exit 75.
      coordinator.throw_if_superseded();
      const auto step_t0 = Clock::now();
      // One optimizer step = the next `accum` global batches (fewer at the end of an epoch, as
      // accelerate steps on the dataloader's last batch). Their gradients are summed locally and
      // reduced once, weighted so the result is the mean over all their samples (accelerate
      // divides by accum instead: the same whenever the batches are full).
      const std::int64_t group_end = std::min(num_batches, b + accum);
      double n_global = 0.0;
      for (std::int64_t k = b; k < group_end; ++k) n_global += plan.batches[k].samples.size();
      const double lr_factor = lr_at_step(lr_opts, state.global_step);
      // Reported lr: the UNet group's (the text encoders' when only they train).
      const double lr = lr_factor * (lora_options.train_unet ? unet_lr : text_encoder_lr);
      optimizer.zero_grad();
      double local_loss_sum = 0.0;
      double data_wait = plan_wait;
      plan_wait = 0.0;
      int n_local = 0;
      for (std::int64_t k = b; k < group_end; ++k) {
        const auto data_t0 = Clock::now();
        std::optional<StepInputs> in =
            local_inputs(plan.batches[k], rank, latents, texts.get(), encoders, preset, dataset,
                         device);
        data_wait += seconds_since(data_t0);
        if (!in) continue;  // the last batch of a bucket may leave a rank without samples
        if (sample_log.enabled()) {
          const auto [lo, hi] = rank_slice(plan.batches[k], rank);
          for (int i = lo; i < hi; ++i) {
            sample_log.write(state.global_step + 1, state.epoch, k, plan.batches[k].samples[i],
                             lr);
          }
        }
        n_local += static_cast<int>(in->latents.size(0));
        auto gen = make_noise_generator(job.shared_seed, rank, state.global_step, k - b);
        at::Tensor loss_sum =
            compute_loss_sum(unet, schedule, *in, gen, config.model.v_parameterization);
        (loss_sum / n_global).backward();
        local_loss_sum += loss_sum.item<double>();
      }
      const auto allreduce_t0 = Clock::now();
      double stop_votes = options.stop_requested && options.stop_requested() ? 1.0 : 0.0;
      const double loss =
          allreduce_gradients(comm, params, local_loss_sum, &stop_votes) / n_global;
      const double allreduce_seconds = seconds_since(allreduce_t0);
      if (!std::isfinite(loss)) {
        // Before the first update the LoRA is a no-op (lora_up is zero), so a non-finite loss
        // comes from the base model or the data, not from the learning rate.
        const bool untouched = result.steps_run == 0 && state.global_step == 0 &&
                               net.network_weights.empty();
        throw std::runtime_error(
            "loss is " + std::to_string(loss) + " at global_step " +
            std::to_string(state.global_step) +
            (untouched ? " before any update: the base checkpoint (" + ckpt +
                             ") or the latents hold NaN/Inf; check the file, or use an fp32/bf16 "
                             "copy if an fp16 VAE overflows"
                       : " (try a lower training.learning_rate)"));
      }
      if (tr.max_grad_norm > 0) clip_grad_norm(params, tr.max_grad_norm);
      optimizer.step(lr_factor);
      sample_log.flush();
      state.global_step += 1;
      state.plan_lineage.back().batches += group_end - b;
      state.step_in_epoch = group_end;
      state.samples_in_epoch += static_cast<std::int64_t>(n_global);
      local_samples_total += n_local;
      result.steps_run += 1;
      b = group_end;

      if (options.verify_sync_every > 0 && state.global_step % options.verify_sync_every == 0) {
        const std::string digest = verify_parameters_in_sync(comm, params);
        LF_INFO("sync check global_step " << state.global_step << " loss " << loss
                                          << " lora_sha256 " << digest);
      }

      const double step_seconds = seconds_since(step_t0);
      metrics.observe_step(state.global_step, n_local, step_seconds, allreduce_seconds,
                           data_wait, loss);
      ProgressUpdate up;
      up.rank = rank;
      up.global_step = state.global_step;
      up.epoch = state.epoch;  // 0-based, as the coordinator's lorafleet_epoch
      up.loss = loss;
      up.learning_rate = lr;
      up.samples = local_samples_total;
      up.step_seconds = step_seconds;
      up.allreduce_seconds = allreduce_seconds;
      up.data_wait_seconds = data_wait;
      up.samples_per_second = step_seconds > 0 ? n_local / step_seconds : 0.0;
      coordinator.report_progress_async(up);
      if (rank == 0) bar.update(state.global_step, loss, lr);

      if (state.step_in_epoch == num_batches) {  // resume at the start of the next epoch
        state.epoch += 1;
        state.step_in_epoch = 0;
        state.samples_in_epoch = 0;
        state.reg_cursor = plan.reg_cursor_end;
      }
      const bool last = state.global_step >= stop_at;
      if (stop_votes > 0 && !last) {
        // Preemption: every rank saw the same vote sum in this step's allreduce.
        if (rank == 0) {
          LF_WARN("stopping after global_step " << state.global_step << " (SIGTERM on "
                                                << stop_votes
                                                << " rank(s)): committing a checkpoint");
        }
        const auto written = checkpoints.write(state, /*final_save=*/false, plan);
        result.preempted = true;
        result.checkpoint_dir = written.checkpoint_dir;
        result.lora_path = written.lora_path;
        break;
      }
      if (!last && tr.save_every_n_steps > 0 && state.global_step % tr.save_every_n_steps == 0) {
        checkpoints.write(state, /*final_save=*/false, plan);
      }
    }
    if (result.preempted) break;
  }
  if (rank == 0) bar.finish();
  result.seconds = seconds_since(loop_start);
  result.global_step = state.global_step;
  if (result.preempted) return result;
  if (result.steps_run == 0) {
    // Resumed at (or past) the end: the checkpoint and LoRA on disk are already the result.
    if (rank == 0) {
      LF_INFO("nothing to train: global_step " << state.global_step << " already reached "
                                               << stop_at << "; outputs left as they are");
    }
    result.checkpoint_dir = resume_dir;
    const fs::path final_lora = out_dir / (config.output.output_name + ".safetensors");
    if (fs::exists(final_lora)) result.lora_path = final_lora.string();
    return result;
  }
  const auto written =
      checkpoints.write(state, /*final_save=*/state.global_step >= job.max_train_steps, plan);
  result.checkpoint_dir = written.checkpoint_dir;
  result.lora_path = written.lora_path;

  // Final metrics snapshot next to the outputs, for runs that end before anyone scraped.
  const fs::path metrics_dir = out_dir / "metrics";
  fs::create_directories(metrics_dir);
  write_file_atomic((metrics_dir / ("worker_rank" + std::to_string(rank) + ".prom")).string(),
                    metrics.serialize());
  if (options.metrics_linger_seconds > 0 && metrics.port() > 0) {
    std::this_thread::sleep_for(std::chrono::seconds(options.metrics_linger_seconds));
  }
  return result;
}

}  // namespace lf
