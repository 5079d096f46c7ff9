// lorafleet-bench-sample: the cost of one sample image (output.sample_prompts) on a seeded random
// checkpoint of a preset: the sampler's loop with classifier-free guidance (a batch of 2 per
// UNet call, as kohya's pipeline), then the VAE decode and the 8-bit conversion. Peer:
// bench/sample_peer_diffusers.py (diffusers' UNet, scheduler and VAE in the same loop);
// bench/run_sample_bench.sh runs both. Prints one JSON line:
//   {"impl": "lorafleet", "preset", "sampler", "steps", "width", "height", "threads",
//    "images", "seconds_per_image" (median), "seconds" (every image)}
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "device/allocator_tuning.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/sd_models.h"
#include "model/unet.h"
#include "sample/sampler.h"
#include "train/noise_schedule.h"
#include "train/seeding.h"

namespace {

struct Args {
  std::string preset = "tiny", sampler = "euler_a";
  int steps = 20, width = 512, height = 512, images = 5, warmup = 1, threads = 1;
  double scale = 7.5;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--preset")
      a.preset = v;
    else if (k == "--sampler")
      a.sampler = v;
    else if (k == "--steps")
      a.steps = std::stoi(v);
    else if (k == "--width")
      a.width = std::stoi(v);
    else if (k == "--height")
      a.height = std::stoi(v);
    else if (k == "--images")
      a.images = std::stoi(v);
    else if (k == "--warmup")
      a.warmup = std::stoi(v);
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--scale")
      a.scale = std::stod(v);
    else
      throw std::invalid_argument("unknown flag " + k);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  lf::tune_allocator_for_tensors();  // as lorafleet-worker does
  torch::set_num_threads(a.threads);
  c10::InferenceMode inference;  // as the worker samples (sample_images.cpp)
  const lf::ModelPreset preset = lf::model_preset(a.preset);
  lf::SDModels models = lf::build_sd_models(preset, /*with_decoder=*/true);
  lf::load_sd_models(models, lf::make_random_checkpoint(preset, 1234));
  models.unet->eval();
  models.vae_decoder->eval();
  const lf::DDPMNoiseSchedule schedule;
  lf::SamplerSpec spec;
  spec.kind = lf::sampler_kind(a.sampler);
  spec.steps = a.steps;
  const int64_t f = preset.vae.downsample_factor();
  const std::vector<int64_t> shape = {1, preset.vae.z_channels, a.height / f, a.width / f};
  at::Generator gen = lf::make_cpu_generator(7);
  const torch::Tensor context = torch::randn({2, 77, preset.unet.context_dim}, gen);
  torch::Tensor y;
  if (preset.unet.adm_in_channels > 0) y = torch::randn({2, preset.unet.adm_in_channels}, gen);
  const lf::GuidedModel model = [&](const torch::Tensor& x, double t) {
    const torch::Tensor out =
        models.unet->forward(torch::cat({x, x}), torch::full({2}, t), context, y);
    const auto parts = out.chunk(2);
    return parts[0] + a.scale * (parts[1] - parts[0]);
  };
  const auto draw = [&] { return torch::randn(shape, gen); };
  std::vector<double> seconds;
  for (int i = 0; i < a.warmup + a.images; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const torch::Tensor latent =
        lf::run_sampler(spec, schedule.alphas_cumprod(), draw(), model, draw);
    const torch::Tensor image = ((models.vae_decoder->decode(latent) / 2 + 0.5).clamp(0, 1) * 255)
                                    .round()
                                    .to(torch::kUInt8);
    (void)image;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= a.warmup) seconds.push_back(s);
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  std::string list;
  for (double s : seconds) list += (list.empty() ? "" : ", ") + std::to_string(s);
  std::printf(
      "{\"impl\": \"lorafleet\", \"preset\": \"%s\", \"sampler\": \"%s\", \"steps\": %d, "
      "\"width\": %d, \"height\": %d, \"threads\": %d, \"images\": %d, "
      "\"seconds_per_image\": %.6f, \"seconds\": [%s]}\n",
      a.preset.c_str(), a.sampler.c_str(), a.steps, a.width, a.height, a.threads, a.images,
      sorted[sorted.size() / 2], list.c_str());
  return 0;
}
