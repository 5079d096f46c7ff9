// One rank's model inputs for one global batch of the epoch plan: cached latents (and alpha
// masks), the text conditioning of each sample's caption, SDXL's vector conditioning and the
// per-sample loss weights, as kohya train_network.py process_batch assembles them.
#pragma once

#include <optional>

#include "common/data/dataset.h"
#include "common/data/epoch_plan.h"
#include "worker/core/model/model_config.h"
#include "worker/core/train/train_step.h"
#include "worker/train/latent_cache.h"
#include "worker/train/text_cache.h"
#include "worker/train/text_encoder_stack.h"

namespace lf {

// This rank's slice of `batch` (rank_slice) as StepInputs on `device`: latents [b, 4, h, w]
// from `latents`, context [b, 75 n + 2, context_dim] (n windows of max_token_length) from
// `texts` (a per-epoch caption is encoded now, a base caption comes from the cache) or, when
// `texts` is null (the text encoders' LoRA trains), one batched forward of `encoders` with
// gradients; SDXL's vector conditioning from the pooled embedding and each sample's real size
// and crop; loss_weights [b]; loss_mask [b, 1, h, w] when any sample has an alpha mask (the
// others get all ones). nullopt when the slice is empty (the last batch of a bucket may leave
// some ranks without samples). The latents are cast to `latent_dtype` (kohya casts them to
// weight_dtype). Throws as LatentCache::get.
std::optional<StepInputs> build_step_inputs(const GlobalBatch& batch, int rank,
                                            LatentCache& latents, TextCache* texts,
                                            TextEncoderStack& encoders, const ModelPreset& preset,
                                            const Dataset& dataset, at::Device device,
                                            at::ScalarType latent_dtype = at::kFloat);

}  // namespace lf
