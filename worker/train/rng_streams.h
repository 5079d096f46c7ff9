// The job's random streams, each a pure function of the shared seed and a position, so that
// reruns, resumes and ranks agree without exchanging RNG state:
//   noise + timesteps  (seed, rank, global_step,   ranks differ, reruns repeat
//                       micro-batch)
//   VAE latent noise   the latent cache key       (latent_disk_cache.h latent_noise_seed): the
//                                                 same image content, bucket, crop and flip give
//                                                 the same latents on every rank and in every run
//   LoRA init          (seed)                     rank 0's draw is broadcast anyway
//   LoRA dropout       (seed, rank, global_step,   as the noise, a stream of its own
//                       micro-batch)
//   sample images      (seed, prompt, global_step) a prompt's --d seed replaces it (kohya)
//   validation noise   (validation_seed, batch,    the same at every validation, on any
//                       timestep)                  world size and after any resume
// Streams are kept apart by a fixed tag mixed in with mix_seed (SplitMix64).
#pragma once

#include <cstdint>

#include "worker/core/train/seeding.h"

namespace lf {

inline std::uint64_t noise_stream_seed(std::uint64_t seed, int rank, std::int64_t global_step) {
  return mix_seed(seed, /*tag=*/1,
                  (static_cast<std::uint64_t>(rank) << 40) ^ static_cast<std::uint64_t>(global_step));
}
// The CPU generator that micro-batch `micro` (0-based, < gradient_accumulation_steps) of step
// `global_step` of `rank` draws its noise and timesteps from. Micro-batch 0 is the step's own
// stream, so a run without gradient accumulation draws exactly what it always did.
inline at::Generator make_noise_generator(std::uint64_t seed, int rank, std::int64_t global_step,
                                          std::int64_t micro = 0) {
  const std::uint64_t s = noise_stream_seed(seed, rank, global_step);
  return make_cpu_generator(micro == 0 ? s
                                       : mix_seed(s, /*tag=*/4, static_cast<std::uint64_t>(micro)));
}
inline std::uint64_t lora_init_seed(std::uint64_t seed) { return mix_seed(seed, /*tag=*/3, 0); }
// The initial noise (and euler_a's draws) of sample prompt `index` sampled after `global_step`,
// for prompts without their own seed (--d): apart from every training stream, so sampling
// changes nothing the training draws.
// Below 2^63, so that the Seed the PNG records can be given back as the prompt's --d.
inline std::uint64_t sample_noise_seed(std::uint64_t seed, int index, std::int64_t global_step) {
  return mix_seed(mix_seed(seed, /*tag=*/6, static_cast<std::uint64_t>(index)), /*tag=*/7,
                  static_cast<std::uint64_t>(global_step)) >>
         1;
}
// The LoRA dropout stream (network_dropout, rank_dropout, module_dropout; lora_dropout.h) of
// micro-batch `micro` of step `global_step` of `rank`: apart from the noise stream, so turning
// dropout on leaves the noise and timesteps as they were.
inline at::Generator make_lora_dropout_generator(std::uint64_t seed, int rank,
                                                 std::int64_t global_step, std::int64_t micro) {
  return make_cpu_generator(mix_seed(noise_stream_seed(seed, rank, global_step), /*tag=*/5,
                                     static_cast<std::uint64_t>(micro)));
}

// The noise of validation batch `batch` (its index in the validation set, whichever rank runs
// it) at validation timestep number `timestep_index`: fixed, so the validation loss of two steps
// or two runs compares the LoRA alone (kohya re-seeds with validation_seed before each pass).
inline at::Generator make_validation_generator(std::uint64_t validation_seed, std::int64_t batch,
                                               int timestep_index) {
  return make_cpu_generator(
      mix_seed(mix_seed(validation_seed, /*tag=*/8, static_cast<std::uint64_t>(batch)),
               /*tag=*/9, static_cast<std::uint64_t>(timestep_index)));
}

}  // namespace lf
