// Training loop (see header). Order of one step, identical on every rank:
//   slice of the global batch → cached latents/contexts → noise + timesteps from a generator
//   seeded by (seed, rank, global_step) → loss_sum/B_global → backward → one fused allreduce of
//   [all LoRA grads | loss_sum] → grad-norm clip → AdamW at lr(global_step) → global_step++.
#include "worker/train/trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <thread>
#include <unordered_map>

#include "common/io/atomic_file.h"
#include "common/io/sha256.h"
#include "common/text/clip_tokenizer.h"
#include "common/util/log.h"
#include "worker/app/progress_bar.h"
#include "worker/app/worker_metrics.h"
#include "worker/core/lora/lora_network.h"
#include "worker/core/model/clip_text_model.h"
#include "worker/core/model/model_config.h"
#include "worker/core/model/state_dict.h"
#include "worker/core/train/train_step.h"
#include "worker/core/model/unet.h"
#include "worker/core/model/vae_encoder.h"
#include "worker/core/train/lr_schedule.h"
#include "worker/core/train/noise_schedule.h"
#include "worker/core/train/optimizer.h"
#include "worker/core/train/seeding.h"
#include "worker/io/checkpoint.h"
#include "worker/io/lora_file.h"
#include "worker/io/tensor_file.h"
#include "worker/train/latent_cache.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Streams of the job, kept apart by a fixed tag so that no two uses share seeds.
constexpr std::uint64_t kNoiseStream = 1;
constexpr std::uint64_t kLatentStream = 2;
constexpr std::uint64_t kLoRAInitStream = 3;

at::Device pick_device(const JobConfig& config, int rank) {
  const std::string& want = config.worker.device;
  const bool cuda = torch_cuda_available();
  if (want == "cuda" && !cuda) {
    throw std::runtime_error("worker.device: cuda requested but no CUDA device is visible");
  }
  if (want == "cpu" || !cuda) return at::Device(at::kCPU);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(cuda_device_for_rank(rank)));
}

// Text contexts per distinct caption, computed once with the frozen text encoder.
class TextCache {
 public:
  TextCache(CLIPTextModel& clip, const CLIPTokenizer& tokenizer, at::Device device)
      : clip_(clip), tokenizer_(tokenizer), device_(device) {}
  const at::Tensor& get(const std::string& caption) {
    auto it = cache_.find(caption);
    if (it != cache_.end()) return it->second;
    const std::vector<int> ids = tokenizer_.tokenize(caption);
    at::Tensor t = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong)
                       .unsqueeze(0)
                       .to(device_);
    torch::NoGradGuard no_grad;
    at::Tensor ctx = clip_->forward(t).squeeze(0).detach();  // [77, C]
    return cache_.emplace(caption, ctx).first->second;
  }

 private:
  CLIPTextModel& clip_;
  const CLIPTokenizer& tokenizer_;
  at::Device device_;
  std::unordered_map<std::string, at::Tensor> cache_;
};

// Allreduce on the communicator's device: NCCL takes CUDA tensors, MPI takes CPU ones.
void allreduce_on(Communicator& comm, at::Tensor& flat) {
  if (comm.backend() == "mpi" && flat.is_cuda()) {
    at::Tensor host = flat.to(at::kCPU).contiguous();
    comm.allreduce_sum(host);
    flat.copy_(host);
  } else {
    comm.allreduce_sum(flat);
  }
}

void broadcast_on(Communicator& comm, at::Tensor& flat, int root) {
  if (comm.backend() == "mpi" && flat.is_cuda()) {
    at::Tensor host = flat.to(at::kCPU).contiguous();
    comm.broadcast(host, root);
    flat.copy_(host);
  } else {
    comm.broadcast(flat, root);
  }
}

// SHA-256 of all LoRA parameters' bytes in their fixed order.
std::string lora_digest(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> parts;
  for (const auto& p : params) parts.push_back(p.detach().to(at::kCPU).reshape({-1}));
  at::Tensor all = torch::cat(parts).contiguous();
  return sha256_hex(all.data_ptr(), all.nbytes());
}

std::string bucket_info_json(const Dataset& dataset) {
  std::map<std::pair<int, int>, int> counts;
  double ar_err = 0.0;
  for (const auto& img : dataset.images) {
    counts[{img.bucket.bucket.width, img.bucket.bucket.height}] += 1;
    ar_err += std::abs(img.bucket.ar_error);
  }
  std::string s = "{\"buckets\": {";
  int i = 0;
  for (const auto& [reso, n] : counts) {
    if (i) s += ", ";
    s += "\"" + std::to_string(i++) + "\": {\"resolution\": [" + std::to_string(reso.first) +
         ", " + std::to_string(reso.second) + "], \"count\": " + std::to_string(n) + "}";
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g",
                dataset.images.empty() ? 0.0 : ar_err / dataset.images.size());
  return s + "}, \"mean_img_ar_error\": " + buf + "}";
}

}  // namespace

bool torch_cuda_available() { return torch::cuda::is_available(); }

int cuda_device_for_rank(int rank) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
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

  // ---- Model: the base checkpoint through the same loader real checkpoints use. ----
  const std::string& ckpt = config.model.pretrained_model_name_or_path;
  if (!fs::exists(ckpt)) {
    throw std::runtime_error("model.pretrained_model_name_or_path: " + ckpt +
                             " does not exist (expected a single-file .safetensors checkpoint)");
  }
  const ModelPreset preset = model_preset(config.model.architecture);
  LoadedTensors base = load_safetensors(ckpt);
  UNetModel unet(preset.unet);
  VAEEncoder vae(preset.vae);
  CLIPTextModel clip(preset.text);
  try {
    load_state_dict(unet, base.tensors);
    load_state_dict(vae, base.tensors);
    load_state_dict(clip, base.tensors);
  } catch (const std::exception& e) {
    throw std::runtime_error(ckpt + ": " + e.what());
  }
  base.tensors.clear();
  for (auto* m : {static_cast<torch::nn::Module*>(unet.get()),
                  static_cast<torch::nn::Module*>(vae.get()),
                  static_cast<torch::nn::Module*>(clip.get())}) {
    freeze_parameters(*m);
    m->eval();
    m->to(device);
  }
  if (rank == 0) {
    LF_INFO("loaded " << ckpt << " (architecture " << config.model.architecture << ") on "
                      << device.str());
  }

  // ---- LoRA: rank 0's initial weights are broadcast so every rank starts identical. ----
  auto init_gen = make_cpu_generator(mix_seed(tr.seed, kLoRAInitStream, 0));
  // Adapters are created on each target layer's device (the UNet is already there).
  LoRANetwork lora(unet, config.network.network_dim, config.network.network_alpha, init_gen);
  if (!config.network.network_weights.empty()) {
    LoadedTensors w = load_safetensors(config.network.network_weights);
    lora.load_state_dict(std::map<std::string, at::Tensor>(w.tensors.begin(), w.tensors.end()));
  }
  std::vector<at::Tensor> params = lora.parameters();
  {
    std::vector<at::Tensor> flat_parts;
    for (auto& p : params) flat_parts.push_back(p.detach().reshape({-1}));
    at::Tensor flat = torch::cat(flat_parts).contiguous();
    broadcast_on(comm, flat, 0);
    int64_t off = 0;
    torch::NoGradGuard ng;
    for (auto& p : params) {
      p.copy_(flat.narrow(0, off, p.numel()).view_as(p));
      off += p.numel();
    }
  }
  if (rank == 0) {
    LF_INFO("LoRA: " << lora.module_names().size() << " modules, network_dim "
                     << config.network.network_dim << ", network_alpha "
                     << config.network.network_alpha << ", " << lora.num_parameters()
                     << " parameters");
  }

  AdamWOptions adam;
  adam.beta1 = tr.adam_beta1;
  adam.beta2 = tr.adam_beta2;
  adam.eps = tr.adam_epsilon;
  adam.weight_decay = tr.adam_weight_decay;
  LoRAOptimizer optimizer(params, adam);
  const std::vector<std::string> param_names = lora.parameter_names();

  // ---- Resume. ----
  TrainState state;
  state.shared_seed = job.shared_seed;
  state.world_size = world_size;
  state.session_id = static_cast<std::int64_t>(mix_seed(job.shared_seed, job.generation, 7) >> 1);
  state.training_started_at = static_cast<double>(std::time(nullptr));
  if (!options.resume.empty()) {
    const std::string dir = resolve_checkpoint(options.resume);
    TrainState loaded = load_train_state(dir);
    if (loaded.shared_seed != job.shared_seed) {
      throw std::runtime_error(dir + ": checkpoint was trained with seed " +
                               std::to_string(loaded.shared_seed) + ", the job has seed " +
                               std::to_string(job.shared_seed));
    }
    if (loaded.world_size != world_size) {
      throw std::runtime_error(dir + ": checkpoint was written by " +
                               std::to_string(loaded.world_size) + " ranks, this run has " +
                               std::to_string(world_size) +
                               " (resuming on a different world size is not supported yet)");
    }
    LoadedTensors lw = load_safetensors(dir + "/lora.safetensors");
    lora.load_state_dict(std::map<std::string, at::Tensor>(lw.tensors.begin(), lw.tensors.end()));
    optimizer.load_state_dict(loaded.optimizer, param_names);
    // Noise is a pure function of (seed, rank, step); the saved generator state is checked
    // against it so a checkpoint from a different stream layout is caught, not silently used.
    if (auto saved = load_rng_state(dir, rank)) {
      auto expect = make_cpu_generator(mix_seed(job.shared_seed, kNoiseStream,
                                                (static_cast<std::uint64_t>(rank) << 40) ^
                                                    static_cast<std::uint64_t>(loaded.global_step)));
      if (!torch::equal(saved->to(at::kByte), expect.get_state())) {
        LF_WARN(dir << ": saved RNG state of rank " << rank
                    << " differs from the derived stream; continuing with the derived stream");
      }
    }
    loaded.optimizer.clear();
    state = loaded;
    if (rank == 0) {
      LF_INFO("resumed from " << dir << " at global_step " << state.global_step << ", epoch "
                              << state.epoch + 1 << ", batch " << state.step_in_epoch);
    }
  }

  // ---- Data. ----
  const Dataset dataset = coordinator.get_dataset();
  const CLIPTokenizer tokenizer = CLIPTokenizer::from_file(config.model.tokenizer_vocab);
  TextCache texts(clip, tokenizer, device);
  LatentCache latents(dataset, mix_seed(tr.seed, kLatentStream, 0), device,
                      [&](const at::Tensor& x, std::uint64_t seed) {
                        torch::NoGradGuard ng;
                        auto gen = make_cpu_generator(seed);
                        return vae->sample_latents(x, gen);
                      });
  const DDPMNoiseSchedule schedule;
  LRScheduleOptions lr_opts;
  lr_opts.name = tr.lr_scheduler;
  lr_opts.base_lr = tr.learning_rate;
  lr_opts.warmup_steps = tr.lr_warmup_steps;
  lr_opts.total_steps = job.max_train_steps;

  WorkerMetrics metrics(rank, options.metrics_bind);
  if (!options.metrics_bind.empty()) {
    LF_INFO("metrics at http://" << config.worker.metrics_host << ":" << metrics.port()
                                 << "/metrics");
  }
  ProgressBar bar(job.max_train_steps, state.global_step, stdout, options.progress_tty);

  const fs::path out_dir(config.output.output_dir);
  const fs::path ckpt_root = out_dir / "checkpoints";
  if (options.resume.empty() && fs::is_directory(ckpt_root)) {
    for (const auto& e : fs::directory_iterator(ckpt_root)) {
      if (e.path().filename().string().rfind("step-", 0) == 0) {
        throw std::runtime_error(
            "output.output_dir " + out_dir.string() + " already holds checkpoints (" +
            e.path().string() + "); pass --resume " + out_dir.string() +
            " to continue that run, or choose another output_dir (nothing was overwritten)");
      }
    }
  }
  if (rank == 0) fs::create_directories(ckpt_root);
  TrainResult result;
  std::int64_t batches_per_epoch = 0;
  int epoch_1based = state.epoch + 1;
  std::int64_t local_samples_total = 0;

  // Writes LoRA + state + each rank's RNG state, then publishes the directory atomically.
  auto write_checkpoint = [&](const TrainState& s, bool final_save) {
    std::string staging;
    if (rank == 0) staging = prepare_staging_dir(ckpt_root.string(), s.global_step);
    comm.barrier();
    staging = (ckpt_root / ("." + checkpoint_dir_name(s.global_step) + ".tmp")).string();
    const std::uint64_t next = static_cast<std::uint64_t>(s.global_step);
    auto gen = make_cpu_generator(
        mix_seed(job.shared_seed, kNoiseStream, (static_cast<std::uint64_t>(rank) << 40) ^ next));
    save_rng_state(staging, rank, gen.get_state());
    std::string published;
    if (rank == 0) {
      LoRATrainingFacts facts;
      facts.session_id = s.session_id;
      facts.training_started_at = s.training_started_at;
      facts.epoch = epoch_1based;
      facts.steps = s.global_step;
      facts.max_train_steps = job.max_train_steps;
      facts.num_epochs = job.num_epochs;
      facts.num_batches_per_epoch = batches_per_epoch;
      facts.num_train_images = dataset.num_train_samples;
      facts.num_reg_images = dataset.num_reg_samples_raw;
      facts.world_size = world_size;
      facts.bucket_info_json = bucket_info_json(dataset);
      auto lora_state = lora.state_dict();
      auto meta = kohya_lora_metadata(config, facts);
      save_kohya_lora((fs::path(staging) / "lora.safetensors").string(), lora_state, meta);
      TrainState to_save = s;
      to_save.optimizer = optimizer.state_dict(param_names);
      save_train_state(staging, to_save);
      comm.barrier();  // every rank's RNG file is durable
      published = publish_staging_dir(staging, ckpt_root.string(), s.global_step);
      // kohya-style copies next to the checkpoints: <name>-step00000050.safetensors / <name>.
      const std::string lora_name =
          final_save ? config.output.output_name + ".safetensors"
                     : config.output.output_name + "-step" +
                           checkpoint_dir_name(s.global_step).substr(5) + ".safetensors";
      save_kohya_lora((out_dir / lora_name).string(), lora_state, meta);
      result.lora_path = (out_dir / lora_name).string();
      prune_checkpoints(ckpt_root.string(), config.output.keep_last_n_checkpoints);
    } else {
      comm.barrier();
    }
    comm.barrier();  // published before anyone reports it
    published = (ckpt_root / checkpoint_dir_name(s.global_step)).string();
    result.checkpoint_dir = published;
    const bool committed = coordinator.commit_checkpoint(rank, s.global_step, published);
    if (rank == 0) {
      LF_INFO("checkpoint " << published << (committed ? " committed" : " written"));
    }
  };

  const std::int64_t stop_at = options.stop_at_step > 0
                                   ? std::min<std::int64_t>(options.stop_at_step, job.max_train_steps)
                                   : job.max_train_steps;
  const auto loop_start = Clock::now();
  while (state.global_step < stop_at) {
    if (state.epoch >= job.num_epochs) {
      throw std::runtime_error("plan exhausted at epoch " + std::to_string(state.epoch) +
                               " before max_train_steps " + std::to_string(job.max_train_steps));
    }
    auto plan_t0 = Clock::now();
    const EpochPlan plan = coordinator.get_epoch_plan(state.epoch);
    double pending_wait = seconds_since(plan_t0);
    batches_per_epoch = static_cast<std::int64_t>(plan.batches.size());
    epoch_1based = state.epoch + 1;
    if (rank == 0) {
      LF_INFO("epoch " << epoch_1based << "/" << job.num_epochs << ": " << plan.batches.size()
                       << " steps, " << plan.num_samples() << " samples ("
                       << plan.reg_indices.size() << " regularization)");
    }
    for (std::int64_t b = state.step_in_epoch;
         b < batches_per_epoch && state.global_step < stop_at; ++b) {
      const auto step_t0 = Clock::now();
      const GlobalBatch& batch = plan.batches[b];
      const auto [lo, hi] = rank_slice(batch, rank, tr.train_batch_size);
      const int n_local = hi - lo;
      const double n_global = static_cast<double>(batch.samples.size());

      // Inputs of this rank's slice (latents/contexts are cached after first use).
      const auto data_t0 = Clock::now();
      std::vector<at::Tensor> lat, ctx;
      std::vector<float> weights;
      for (int i = lo; i < hi; ++i) {
        const PlanSample& smp = batch.samples[i];
        lat.push_back(latents.get(smp.image_index));
        ctx.push_back(texts.get(dataset.images[smp.image_index].caption));
        weights.push_back(smp.loss_weight);
      }
      const double data_wait = seconds_since(data_t0) + pending_wait;
      pending_wait = 0.0;

      const double lr = lr_at_step(lr_opts, state.global_step);
      optimizer.zero_grad();
      double loss_sum_local = 0.0;
      if (n_local > 0) {
        StepInputs in;
        in.latents = torch::stack(lat);
        in.context = torch::stack(ctx);
        in.loss_weights = torch::tensor(weights).to(device);
        auto gen = make_cpu_generator(
            mix_seed(job.shared_seed, kNoiseStream,
                     (static_cast<std::uint64_t>(rank) << 40) ^
                         static_cast<std::uint64_t>(state.global_step)));
        at::Tensor loss_sum = compute_loss_sum(unet, schedule, in, gen);
        (loss_sum / n_global).backward();
        loss_sum_local = loss_sum.item<double>();
      }

      // One fused allreduce: every LoRA gradient plus the loss sum.
      const auto ar_t0 = Clock::now();
      std::vector<at::Tensor> parts;
      parts.reserve(params.size() + 1);
      for (auto& p : params) {
        parts.push_back(p.grad().defined() ? p.grad().reshape({-1})
                                           : torch::zeros({p.numel()}, p.options()));
      }
      parts.push_back(torch::full({1}, loss_sum_local, params[0].options()));
      at::Tensor flat = torch::cat(parts).contiguous();
      allreduce_on(comm, flat);
      int64_t off = 0;
      for (auto& p : params) {
        at::Tensor g = flat.narrow(0, off, p.numel()).view_as(p);
        if (p.grad().defined()) {
          p.mutable_grad().copy_(g);
        } else {
          p.mutable_grad() = g.clone();
        }
        off += p.numel();
      }
      const double loss = flat[off].item<double>() / n_global;
      const double allreduce_s = seconds_since(ar_t0);

      if (tr.max_grad_norm > 0) clip_grad_norm(params, tr.max_grad_norm);
      optimizer.step(lr);
      state.global_step += 1;
      state.step_in_epoch = b + 1;
      state.samples_in_epoch += static_cast<std::int64_t>(batch.samples.size());
      local_samples_total += n_local;
      result.steps_run += 1;

      if (!std::isfinite(loss)) {
        throw std::runtime_error("loss is " + std::to_string(loss) + " at global_step " +
                                 std::to_string(state.global_step) +
                                 " (lower training.learning_rate?)");
      }
      if (options.verify_sync_every > 0 && state.global_step % options.verify_sync_every == 0) {
        const std::string digest = lora_digest(params);
        at::Tensor mine = torch::from_blob(const_cast<char*>(digest.data()),
                                           {static_cast<int64_t>(digest.size())}, torch::kByte)
                              .clone();
        at::Tensor root = mine.clone();
        comm.broadcast(root, 0);
        LF_INFO("sync check global_step " << state.global_step << " loss " << loss
                                          << " lora_sha256 " << digest);
        if (!torch::equal(mine, root)) {
          throw std::runtime_error("rank " + std::to_string(rank) +
                                   " LoRA weights differ from rank 0 at global_step " +
                                   std::to_string(state.global_step));
        }
      }

      const double step_s = seconds_since(step_t0);
      metrics.observe_step(state.global_step, n_local, step_s, allreduce_s, data_wait, loss);
      ProgressUpdate up;
      up.rank = rank;
      up.global_step = state.global_step;
      up.epoch = state.epoch;  // 0-based, as the coordinator's lorafleet_epoch
      up.loss = loss;
      up.learning_rate = lr;
      up.samples = local_samples_total;
      up.step_seconds = step_s;
      up.allreduce_seconds = allreduce_s;
      up.data_wait_seconds = data_wait;
      up.samples_per_second = step_s > 0 ? n_local / step_s : 0.0;
      coordinator.report_progress_async(up);
      if (rank == 0) bar.update(state.global_step, loss, lr);

      const bool last = state.global_step >= stop_at;
      if (!last && tr.save_every_n_steps > 0 && state.global_step % tr.save_every_n_steps == 0) {
        TrainState at = state;
        if (at.step_in_epoch >= batches_per_epoch) {
          at.epoch += 1;
          at.step_in_epoch = 0;
          at.samples_in_epoch = 0;
        }
        write_checkpoint(at, /*final_save=*/false);
      }
    }
    if (state.global_step < stop_at || state.step_in_epoch >= batches_per_epoch) {
      state.epoch += 1;
      state.step_in_epoch = 0;
      state.samples_in_epoch = 0;
    }
  }
  if (rank == 0) bar.finish();
  result.seconds = seconds_since(loop_start);
  result.global_step = state.global_step;
  write_checkpoint(state, /*final_save=*/state.global_step >= job.max_train_steps);

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
