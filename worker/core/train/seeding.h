// Seed derivation and explicit CPU generators, so that every random draw of a run is a function
// of (seed, rank, global_step) and CPU and CUDA runs draw the same values. SplitMix64 is
// Steele, Lea & Flood's generator (java.util.SplittableRandom), as used to seed xoshiro.
#pragma once

#include <cstdint>

#include <ATen/core/Generator.h>

namespace lf {

// One SplitMix64 step: state += 0x9E3779B97F4A7C15, returns the mixed state.
uint64_t splitmix64_next(uint64_t& state);

// Derives an independent seed from (seed, a, b):
//   s = seed; h1 = splitmix64_next(s); s = h1 ^ a; h2 = splitmix64_next(s); s = h2 ^ b;
//   return splitmix64_next(s).
// E.g. mix_seed(run_seed, rank, global_step) for the noise of one training step.
uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b);

// A fresh CPU generator (mt19937, at::CPUGeneratorImpl) seeded with `seed`.
at::Generator make_cpu_generator(uint64_t seed);

}  // namespace lf
