// Sample images during training (see header).
#include "worker/train/sample_images.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "common/image/png_encode.h"
#include "common/io/atomic_file.h"
#include "common/util/elapsed.h"
#include "common/util/log.h"
#include "common/util/wall_clock.h"
#include "worker/core/model/unet.h"
#include "worker/core/sample/sampler.h"
#include "worker/core/train/autocast.h"
#include "worker/core/train/seeding.h"
#include "worker/train/rng_streams.h"
#include "worker/train/training_session.h"

namespace fs = std::filesystem;

namespace lf {
namespace {

std::string sampler_name(const JobConfig& config, const SamplePrompt& p) {
  return p.sampler.empty() ? config.output.sample_sampler : p.sampler;
}

SamplerSpec spec_of(const JobConfig& config, const SamplePrompt& p) {
  SamplerSpec spec;
  spec.kind = sampler_kind(sampler_name(config, p));
  spec.steps = p.sample_steps;
  spec.karras_sigmas =
      config.output.sample_use_karras_sigmas && sampler_takes_karras_sigmas(spec.kind);
  spec.v_prediction = config.model.v_parameterization;
  return spec;
}

// kohya: time.strftime("%Y%m%d%H%M%S", time.localtime()), of rank 0's clock for every rank.
std::string shared_timestamp(TrainingSession& s) {
  at::Tensor now = torch::tensor({static_cast<std::int64_t>(std::time(nullptr))},
                                 torch::TensorOptions().dtype(torch::kInt64).device(s.device));
  s.comm.broadcast(now, 0);
  return kohya_local_timestamp(static_cast<std::time_t>(now.cpu().item<std::int64_t>()));
}

// A1111's "parameters" text, which web UIs and viewers show.
std::string parameters_text(const JobConfig& config, const SamplePrompt& p, std::uint64_t seed,
                            std::int64_t global_step) {
  std::ostringstream o;
  o << p.prompt << "\n";
  if (!p.negative_prompt.empty()) o << "Negative prompt: " << p.negative_prompt << "\n";
  o << "Steps: " << p.sample_steps << ", Sampler: " << sampler_name(config, p)
    << (spec_of(config, p).karras_sigmas ? " Karras" : "") << ", CFG scale: " << p.scale
    << ", Seed: " << seed << ", Size: " << p.width << "x" << p.height
    << ", Model: " << fs::path(config.model.pretrained_model_name_or_path).stem().string()
    << ", Lora: " << config.output.output_name << ", Global step: " << global_step;
  return o.str();
}

// The final latent of one prompt: [negative, prompt] conditioning, the guided UNet (the
// training's autocast), SDXL's size conditioning for an uncropped image of the prompt's size.
at::Tensor sample_latent(TrainingSession& s, const SamplePrompt& p, const SamplerSpec& spec,
                         std::uint64_t seed) {
  const ModelPreset& preset = s.base.models.preset;
  const TextConditioning c = s.encoders->encode({p.negative_prompt, p.prompt}, s.device);
  at::Tensor y;
  if (preset.unet.adm_in_channels > 0) {
    const float h = static_cast<float>(p.height), w = static_cast<float>(p.width);
    const at::Tensor sizes = torch::tensor({h, w, 0.f, 0.f, h, w}).repeat({2, 1}).to(s.device);
    y = sdxl_vector_conditioning(c.pooled, sizes, preset.unet.adm_time_embed_dim);
  }
  const int64_t f = preset.vae.downsample_factor();
  const std::vector<int64_t> shape = {1, preset.vae.z_channels, p.height / f, p.width / f};
  at::Generator gen = make_cpu_generator(seed);
  const auto draw = [&] { return torch::randn(shape, gen, torch::kFloat32).to(s.device); };
  const GuidedModel model = [&](const at::Tensor& input, double t) {
    AutocastScope amp(s.device.type(), s.precision.weight_dtype, s.precision.autocast);
    const at::Tensor x = torch::cat({input, input}).to(s.precision.weight_dtype);
    const at::Tensor ts = torch::full({2}, t, torch::TensorOptions().device(s.device));
    const at::Tensor out = s.base.models.unet->forward(x, ts, c.context, y).to(torch::kFloat32);
    const auto parts = out.chunk(2);
    return parts[0] + p.scale * (parts[1] - parts[0]);
  };
  const at::Tensor noise = draw();
  // zero_terminal_snr ends alphas_cumprod at 0 (an infinite sigma): diffusers' schedulers with
  // rescale_betas_zero_snr set it to 2^-24 for sampling; a no-op otherwise (it ends at 0.0047).
  const at::Tensor abar = s.noise_schedule.alphas_cumprod().clamp_min(std::ldexp(1.0, -24));
  return run_sampler(spec, abar, noise, model, draw);
}

// The decoded image as 8-bit RGB, rounded as diffusers' numpy_to_pil.
std::vector<std::uint8_t> decode_rgb(TrainingSession& s, const at::Tensor& latent) {
  at::Tensor img = s.base.models.vae_decoder->decode(latent.to(s.precision.vae_dtype));
  img = ((img.to(torch::kFloat32) / 2 + 0.5).clamp(0, 1) * 255).round().to(torch::kUInt8);
  img = img[0].permute({1, 2, 0}).contiguous().cpu();
  const auto* p = img.data_ptr<std::uint8_t>();
  return std::vector<std::uint8_t>(p, p + img.numel());
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read sample image " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

SampleImages::SampleImages(const JobConfig& config) : config_(config) {
  if (config.sample_prompts_text.empty()) return;
  prompts_ = parse_sample_prompts(config.sample_prompts_text, config.output.sample_prompts);
}

bool SampleImages::due_at_start(std::int64_t start_step) const {
  return enabled() && config_.output.sample_at_first && start_step == 0;
}

bool SampleImages::due_after_step(std::int64_t global_step) const {
  const int n = config_.output.sample_every_n_steps;
  return enabled() && config_.output.sample_every_n_epochs == 0 && n > 0 && global_step % n == 0;
}

bool SampleImages::due_after_epoch(int epoch) const {
  const int n = config_.output.sample_every_n_epochs;
  return enabled() && n > 0 && epoch % n == 0;
}

bool SampleImages::missing_at_resume(TrainingSession& s, std::int64_t start_step) const {
  if (start_step == 0 || !due_after_step(start_step)) return false;
  bool missing = true;
  if (s.rank == 0) {
    char prefix[64];
    std::snprintf(prefix, sizeof(prefix), "%s_%06lld_", config_.output.output_name.c_str(),
                  static_cast<long long>(start_step));
    const fs::path dir = fs::path(config_.output.output_dir) / "sample";
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().rfind(prefix, 0) == 0) missing = false;
    }
  }
  at::Tensor flag = torch::tensor({missing ? 1.0 : 0.0},
                                  torch::TensorOptions().dtype(torch::kFloat32).device(s.device));
  s.comm.broadcast(flag, 0);
  return flag.cpu().item<float>() > 0;
}

std::string SampleImages::file_name(const SamplePrompt& p, std::int64_t global_step,
                                    std::optional<int> epoch, const std::string& timestamp) const {
  char num[32], index[8];
  if (epoch) {
    std::snprintf(num, sizeof(num), "e%06d", *epoch);
  } else {
    std::snprintf(num, sizeof(num), "%06lld", static_cast<long long>(global_step));
  }
  std::snprintf(index, sizeof(index), "%02d", p.index);
  const std::string seed = p.seed ? "_" + std::to_string(*p.seed) : "";
  return config_.output.output_name + "_" + num + "_" + index + "_" + timestamp + seed + ".png";
}

void SampleImages::generate(TrainingSession& s, std::int64_t global_step, std::optional<int> epoch,
                            TrainObserver* observer) {
  const auto t0 = SteadyClock::now();
  const std::string timestamp = shared_timestamp(s);
  const fs::path dir = fs::path(config_.output.output_dir) / "sample";
  fs::create_directories(dir);
  {
    torch::NoGradGuard no_grad;
    s.optimizer->use_eval_weights();  // kohya: optimizer.eval() around sampling
    s.base.models.vae_decoder->to(s.device);
    // Inference mode (no version counters or autograd dispatch: ~18% faster than no_grad on
    // the tiny UNet); not while UNet blocks are streamed, whose device copies outlive the call.
    std::optional<c10::InferenceMode> inference;
    if (!s.streamer) inference.emplace();
    for (const SamplePrompt& p : prompts_) {
      if (p.index % s.world_size != s.rank) continue;
      const std::uint64_t seed = p.seed
                                     ? static_cast<std::uint64_t>(*p.seed)
                                     : sample_noise_seed(s.job.shared_seed, p.index, global_step);
      const at::Tensor latent = sample_latent(s, p, spec_of(config_, p), seed);
      const std::string png =
          encode_png_rgb(decode_rgb(s, latent), p.width, p.height,
                         {{"parameters", parameters_text(config_, p, seed, global_step)}});
      write_file_atomic((dir / file_name(p, global_step, epoch, timestamp)).string(), png);
    }
    inference.reset();
    if (s.device.is_cuda()) s.base.models.vae_decoder->to(at::kCPU);
    s.optimizer->use_train_weights();
  }
  // Every rank's images are on disk; all resume training together. The ranks with more prompts
  // (or larger ones) arrive later than a training collective may take: the wait is bounded by
  // the rendezvous timeout instead, then the step's timeout is back.
  s.comm.set_timeout(std::chrono::seconds(config_.cluster.rendezvous_timeout_seconds));
  s.comm.barrier();
  s.comm.set_timeout(std::chrono::seconds(config_.cluster.collective_timeout));
  if (s.rank != 0) return;
  for (const SamplePrompt& p : prompts_) {
    const std::string path = (dir / file_name(p, global_step, epoch, timestamp)).string();
    // Another rank's image is only here when output_dir is shared (as checkpoints need).
    if (observer && fs::exists(path)) {
      observer->on_sample_image({global_step, p.index, path, read_bytes(path), p.width, p.height});
    }
  }
  LF_INFO("sample images: " << prompts_.size() << " after global_step " << global_step << " in "
                            << dir.string() << " (" << seconds_since(t0) << " s)");
}

}  // namespace lf
