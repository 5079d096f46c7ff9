// SplitMix64 seed mixing and seeded CPU generators (at::CPUGeneratorImpl).
#include "train/seeding.h"

#include <ATen/CPUGeneratorImpl.h>

namespace lf {

uint64_t splitmix64_next(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ULL;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t s = seed;
  s = splitmix64_next(s) ^ a;
  s = splitmix64_next(s) ^ b;
  return splitmix64_next(s);
}

at::Generator make_cpu_generator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

}  // namespace lf
