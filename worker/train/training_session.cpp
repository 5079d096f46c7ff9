// Training setup (see header), stage by stage.
#include "worker/train/training_session.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "common/io/safetensors.h"
#include "common/io/sha256.h"
#include "common/util/elapsed.h"
#include "common/util/log.h"
#include "common/util/wall_clock.h"
#include "worker/core/model/lora_compatible.h"
#include "worker/core/model/state_dict.h"
#include "worker/dist/parameter_sync.h"
#include "worker/io/lora_file.h"
#include "worker/train/lora_network_setup.h"
#include "worker/train/lora_param_lrs.h"
#include "worker/train/lr_schedule_setup.h"
#include "worker/train/model_identity.h"
#include "worker/train/optimizer_setup.h"
#include "worker/train/recipe_setup.h"
#include "worker/train/resume_point.h"
#include "worker/train/rng_streams.h"
#include "worker/train/run_precision.h"
#include "worker/train/vram_budget.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

// Identity of a frozen model for cache keys: a digest of all its weights (model_identity.h).
std::string weights_identity(const torch::nn::Module& module) {
  const WeightMap w = module_weights(module, "");
  return module_identity(std::map<std::string, at::Tensor>(w.begin(), w.end()));
}

// Identity of the text encoders for the text-output disk cache: every encoder's weights and the
// layer each returns.
std::string text_encoders_identity(TextEncoderStack& encoders) {
  std::string id;
  for (auto& te : encoders.encoders()) id += weights_identity(*te) + ";";
  return sha256_hex(id + "layers=" + encoders.layer_rendering());
}

// dataset.cache_dir, or <output_dir>/cache when it is not set.
std::string cache_dir_of(const JobConfig& config) {
  return config.dataset.cache_dir.empty()
             ? (fs::path(config.output.output_dir) / "cache").string()
             : config.dataset.cache_dir;
}

// The dtypes the parameters of `m` are stored in, e.g. "bf16+fp8_e4m3fn" (read from the
// tensors, for the log).
std::string dtypes_of(const torch::nn::Module& m) {
  std::set<std::string> names;
  for (const auto& p : m.parameters()) names.insert(dtype_name(p.scalar_type()));
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : "+") + n;
  return out;
}

// True when the checkpoint's LoRA file has text-encoder modules.
bool checkpoint_has_text_encoder_lora(const std::string& dir) {
  const SafetensorsFile saved = SafetensorsFile::open(dir + "/lora.safetensors");
  return std::any_of(saved.tensors().begin(), saved.tensors().end(),
                     [](const TensorInfo& t) { return t.name.rfind("lora_te", 0) == 0; });
}

}  // namespace

TrainingSession::TrainingSession(const JobConfig& config_, const JobAssignment& job_,
                                 Communicator& comm_, CoordinatorClient& coordinator_,
                                 at::Device device_)
    : config(config_),
      job(job_),
      comm(comm_),
      coordinator(coordinator_),
      device(device_),
      rank(comm_.rank()),
      world_size(comm_.world_size()),
      precision(precision_of(config_)),
      memory(device_) {
  torch::set_num_threads(std::max(1, config.worker.num_threads));
  comm.set_timeout(std::chrono::seconds(config.cluster.rendezvous_timeout_seconds));
  // The resume point first, before the model loads. The coordinator chose it for the group and
  // checked it against the job (a fresh run's output_dir, seed, batching, optimizer, plan).
  std::unique_ptr<ResumePoint> resume;
  if (job.resume) {
    resume = std::make_unique<ResumePoint>(open_resume_point(*job.resume));
    resume_dir = resume->dir;
  }
  check_device_support(config, precision, device);
  apply_determinism(config, device);
  load_model();
  build_network(resume.get());
  build_optimizer();
  restore(std::move(resume));
  prepare_data();
  fill_caches();
  if (config.worker.vram_budget_gb > 0) {
    streamer = apply_vram_budget({config, precision, base.models, *lora,
                                  train_text_encoder ? encoders.get() : nullptr, dataset,
                                  device, rank});
  }
  if (rank == 0) LF_INFO("peak memory: " << memory.summary());
}

TrainingSession::~TrainingSession() = default;

double TrainingSession::reported_lr(double factor) const {
  return factor * (train_unet ? unet_lr : text_encoder_lr);
}

// The base checkpoint through the same loader real checkpoints use, frozen, on the device.
void TrainingSession::load_model() {
  const std::string& ckpt = config.model.pretrained_model_name_or_path;
  if (!fs::exists(ckpt)) {
    throw std::runtime_error("model.pretrained_model_name_or_path: " + ckpt +
                             " does not exist (expected a single-file .safetensors checkpoint)");
  }
  // kohya's weight_dtype for the UNet and the text encoders, vae_dtype for the VAE.
  SDModelDtypes dtypes;
  dtypes.unet = dtypes.text_encoders = precision.weight_dtype;
  dtypes.vae = precision.vae_dtype;
  // The VAE decoder only for sample images; it stays on the CPU between them.
  base = load_base_model(config.model, dtypes, !config.sample_prompts_text.empty());
  SDModels& models = base.models;
  if (models.vae_decoder) {
    freeze_parameters(*models.vae_decoder);
    models.vae_decoder->eval();
  }
  if (precision.unet_matrix_dtype != precision.weight_dtype) {  // fp8_base, still on the CPU
    set_matrix_dtype(*models.unet, precision.unet_matrix_dtype);
  }
  std::vector<torch::nn::Module*> frozen = {models.unet.get(), models.vae_encoder.get()};
  for (auto& te : models.text_encoders) frozen.push_back(te.get());
  for (torch::nn::Module* m : frozen) {
    freeze_parameters(*m);
    m->eval();
    m->to(device);
  }
  if (rank == 0) {
    std::string te;
    for (const auto& t : models.text_encoders) te += (te.empty() ? "" : ", ") + dtypes_of(*t);
    LF_INFO("loaded " << ckpt << " on " << device.str() << ": " << base.summary);
    LF_INFO("mixed_precision " << precision.describe() << "; frozen weights: UNet "
                               << dtypes_of(*models.unet) << ", text encoders " << te
                               << ", VAE " << dtypes_of(*models.vae_encoder));
  }
  if (config.training.gradient_checkpointing) {
    const std::size_t blocks = models.unet->set_gradient_checkpointing(true);
    if (rank == 0) LF_INFO("gradient checkpointing: " << blocks << " UNet blocks");
  }
  memory.end_phase("model load");
  const ModelFamily family = models.preset.family;
  if (rank == 0 && config.model.v_parameterization && family != ModelFamily::kSD2) {
    // As kohya: v-prediction is an SD 2.x (768-v) convention; elsewhere it is usually a mistake.
    LF_WARN("model.v_parameterization is set for a " << family_name(family)
                                                      << " model; v-prediction base models are "
                                                         "SD 2.x 768-v");
  }
}

// The LoRA: rank 0's initial weights are broadcast so every rank starts identical.
void TrainingSession::build_network(const ResumePoint* resume) {
  const auto& net = config.network;
  SDModels& models = base.models;
  auto init_gen = make_cpu_generator(lora_init_seed(config.training.seed));
  const LoRANetworkSetup setup = lora_network_setup(config, models);
  if (rank == 0) {
    for (const std::string& note : setup.notes) LF_WARN(note);
  }
  LoRANetworkOptions options = setup.options;
  if (resume && options.train_text_encoder && !checkpoint_has_text_encoder_lora(resume->dir)) {
    // A checkpoint without text-encoder modules (network_train_unet_only, or lorafleet before
    // text-encoder LoRA became the default) resumes as it was trained, not with a new network.
    options.train_text_encoder = false;
    if (rank == 0) {
      LF_WARN(resume->dir << " was trained without text-encoder LoRA modules; resuming it "
                             "UNet-only (set network.network_train_unet_only: true to say so)");
    }
  }
  // Adapters are created on each target layer's device (the models are already there).
  const bool sdxl = models.preset.family == ModelFamily::kSDXL;
  // The network's options and its network_weights come from the config: a network they cannot
  // build (an OFT block size that does not divide a layer, a file of another rank or family) is
  // bad input, not a fault a restart cures (exit 3).
  LoRALoadReport report;
  try {
    lora = std::make_unique<LoRANetwork>(models.unet, unet_lora_naming(models.unet, sdxl),
                                         kohya_text_encoder_targets(models), options, init_gen);
    if (!net.network_weights.empty()) report = load_network_weights(*lora, net.network_weights);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(config.source_name + ": network: " + e.what());
  } catch (const std::runtime_error& e) {
    if (dynamic_cast<const ConfigError*>(&e) != nullptr) throw;
    throw ConfigError(config.source_name + ": network.network_weights: " + e.what());
  }
  if (!net.network_weights.empty()) {
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
  // kohya full_fp16 / full_bf16: network.to(weight_dtype), after any network_weights load.
  if (precision.lora_dtype != at::kFloat) lora->set_dtype(precision.lora_dtype);
  params = lora->parameters();
  param_names = lora->parameter_names();
  broadcast_parameters(comm, params, 0);
  const std::size_t te_modules = lora->num_text_encoder_modules();
  if (rank == 0) {
    const bool oft = net.algo == "oft";
    const std::string kind = oft                  ? "OFT"
                             : net.algo == "loha" ? "LoHa"
                             : net.algo == "lokr" ? "LoKr"
                                                  : "LoRA";
    LF_INFO(kind << ": " << lora->module_names().size() << " modules (" << te_modules
                 << " on the text encoders), network_dim " << net.network_dim
                 << (oft ? " (blocks per layer)" : "") << ", network_alpha " << net.network_alpha
                 << (oft ? " (constraint = alpha x out_dim)" : "")
                 << (net.conv_dim > 0 ? ", conv_dim " + std::to_string(net.conv_dim) : "") << ", "
                 << lora->num_parameters() << " parameters");
  }
  train_unet = options.train_unet;
  train_text_encoder = te_modules > 0;
  if (config.training.gradient_checkpointing && train_text_encoder) {
    // Only trained encoders run with gradients; frozen ones fill the text cache without.
    std::size_t layers = 0;
    for (auto& te : models.text_encoders) layers += te->set_gradient_checkpointing(true);
    if (rank == 0) LF_INFO("gradient checkpointing: " << layers << " text-encoder layers");
  }
}

// kohya's optimizer_type with its unet_lr / text_encoder_lr (and LoRA+) groups: one schedule,
// each parameter's lr a multiple of its factor.
void TrainingSession::build_optimizer() {
  unet_lr = config.network.unet_lr.value_or(config.training.learning_rate);
  text_encoder_lr = config.network.text_encoder_lr.value_or(config.training.learning_rate);
  std::set<const void*> te_params;
  for (const auto& p : lora->text_encoder_parameters()) te_params.insert(p.unsafeGetTensorImpl());
  std::vector<bool> is_te(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    is_te[i] = te_params.count(params[i].unsafeGetTensorImpl()) != 0;
  }
  optimizer = build_lora_optimizer(config, params, lora_parameter_lrs(config, param_names, is_te));
}

// The position to continue at: the checkpoint's, or a fresh one.
void TrainingSession::restore(std::unique_ptr<ResumePoint> resume) {
  if (!resume) {
    state.shared_seed = job.shared_seed;
    state.world_size = world_size;
    // From the seed alone (as generation 1 drew it): a group restarted before the first
    // checkpoint starts afresh in a later generation, and that restart is invisible in the
    // weights, so it must be in the LoRA's ss_session_id too (same config and seed, same bytes).
    state.session_id = static_cast<std::int64_t>(mix_seed(job.shared_seed, 1, 7) >> 1);
    state.training_started_at = static_cast<double>(output_timestamp());
  } else {
    state = apply_resume_point(std::move(*resume), job, rank, *lora, *optimizer, param_names);
    // A schedule-free checkpoint holds the evaluation weights x: training continues from y
    // (kohya calls optimizer.train() before training).
    optimizer->use_train_weights();
  }
  state.world_size = world_size;  // this group's, whoever wrote the checkpoint
  // The facts a resume of this run's checkpoints must share (checked by the coordinator).
  const ResumeExpectations facts = resume_expectations_of(config);
  state.gradient_accumulation_steps = facts.gradient_accumulation_steps;
  state.batch_sizes = facts.batch_sizes;
  state.optimizer_type = facts.optimizer_type;
  if (!precision.loss_scaling) {
    state.loss_scale = 0.0;  // a checkpoint of an fp16 run continued in bf16 / fp32
    return;
  }
  loss_scaler = std::make_unique<LossScaler>();
  if (state.loss_scale > 0) {
    loss_scaler->restore(state.loss_scale, state.loss_scale_growth_tracker);
  } else if (state.global_step > 0 && rank == 0) {
    LF_WARN(resume_dir << " holds no fp16 loss scale (it was trained without fp16); starting "
                          "at " << loss_scaler->scale());
  }
  state.loss_scale = loss_scaler->scale();
  state.loss_scale_growth_tracker = loss_scaler->growth_tracker();
}

// The dataset, the text encoders and the caches of their outputs and of the latents.
void TrainingSession::prepare_data() {
  dataset = coordinator.get_dataset();
  tokenizer = std::make_unique<CLIPTokenizer>(CLIPTokenizer::from_file(config.model.tokenizer_vocab));
  const ModelPreset& preset = base.models.preset;
  try {
    encoders = std::make_unique<TextEncoderStack>(preset, base.models.text_encoders, *tokenizer,
                                                  config.training.clip_skip,
                                                  config.training.max_token_length);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(config.source_name + ": " + e.what());  // e.g. training.clip_skip
  }
  // Frozen text encoders: their outputs are cached per caption (kohya
  // cache_text_encoder_outputs); trained ones run every step.
  if (!train_text_encoder) {
    TextCache::Options text_options;
    text_options.device = device;
    if (config.dataset.cache_text_encoder_outputs_to_disk) {
      text_options.disk_dir = (fs::path(cache_dir_of(config)) / "text").string();
      text_options.text_encoder_identity = text_encoders_identity(*encoders);
      text_options.tokenizer_identity = sha256_file_hex(config.model.tokenizer_vocab);
    }
    texts = std::make_unique<TextCache>(*encoders, text_options);
  }
  LatentCache::Options latent_options;
  latent_options.device = device;
  latent_options.max_image_pixels = config.dataset.max_image_pixels;
  // Always: the VAE noise of an entry is seeded by its key, which holds the VAE's identity, so
  // a run with the disk cache and one without encode the very same latents.
  VAEEncoder& vae = base.models.vae_encoder;
  latent_options.vae_identity = weights_identity(*vae);
  if (config.dataset.cache_latents_to_disk) {
    latent_options.disk_dir = (fs::path(cache_dir_of(config)) / "latents").string();
  }
  // Runs where the VAE is, in its dtype (kohya vae_dtype); the cache keeps float32 latents.
  latents = std::make_unique<LatentCache>(
      dataset, latent_options, [vae](const at::Tensor& x, std::uint64_t noise_seed) mutable {
        torch::NoGradGuard no_grad;
        auto gen = make_cpu_generator(noise_seed);
        const at::Tensor w = vae->parameters().front();
        return vae->sample_latents(x.to(w.device(), w.scalar_type()), gen).to(at::kFloat);
      });
  // base_lr 1: the schedule's factor, which each group's lr multiplies.
  lr_schedule = lr_schedule_options(config.training, job.max_train_steps);
  noise_schedule = noise_schedule_for(config);
  recipe = diffusion_recipe(config);
}

// Fills the caches before training where that lets a frozen model leave the device (kohya
// cache_latents moves the VAE to the CPU, cache_text_encoder_outputs the text encoders).
void TrainingSession::fill_caches() {
  const auto t0 = SteadyClock::now();
  bool latents_complete = false;
  if (config.dataset.cache_latents_to_disk) {
    // kohya cache_latents_to_disk: every rank encodes its share of the missing entries before
    // training, then all read every entry from disk.
    const LatentCache::ShardStats st = latents->precompute_shard(rank, world_size);
    comm.barrier();
    LF_INFO("latent cache " << (fs::path(cache_dir_of(config)) / "latents").string() << ": "
                            << st.encoded << " encoded by this rank, " << st.reused
                            << " reused, " << st.stale << " stale re-encoded ("
                            << seconds_since(t0) << " s)");
    latents_complete = latents->fully_cacheable();
  } else if (device.is_cuda() && latents->fully_cacheable()) {
    // On the CPU there is no device memory to free: the latents are encoded as first used.
    const int n = latents->precompute_all();
    LF_INFO("latent cache: " << n << " entries encoded before training ("
                             << seconds_since(t0) << " s)");
    latents_complete = true;
  }
  if (device.is_cuda() && latents_complete) base.models.vae_encoder->to(at::kCPU);
  bool random_captions = false;
  for (const SubsetInfo& sub : dataset.subsets) random_captions |= sub.config.caption.is_random();
  if (device.is_cuda() && texts && !random_captions) {
    std::vector<std::string> captions;
    for (const ImageRecord& image : dataset.images) captions.push_back(image.caption);
    const std::size_t n = texts->precompute(captions);
    for (auto& te : base.models.text_encoders) te->to(at::kCPU);
    LF_INFO("text-encoder outputs: " << n << " captions cached; the text encoders left "
                                     << device.str());
  }
  memory.end_phase("caches");
}

}  // namespace lf
