// Step inputs of one rank (see header).
#include "worker/train/step_inputs.h"

#include <torch/torch.h>

#include <array>
#include <string>
#include <vector>

#include "common/data/size_conditioning.h"
#include "worker/core/model/unet.h"

namespace lf {

std::optional<StepInputs> build_step_inputs(const GlobalBatch& batch, int rank,
                                            LatentCache& latents, TextCache* texts,
                                            TextEncoderStack& encoders, const ModelPreset& preset,
                                            const Dataset& dataset, at::Device device,
                                            at::ScalarType latent_dtype) {
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
  in.latents = torch::stack(lat).to(latent_dtype);
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

}  // namespace lf
