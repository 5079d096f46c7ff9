// The fully specified random draws of the coordinator's planning (epoch plans, the validation
// hold-out): SplitMix64 for seed mixing, std::mt19937_64 streams (whose output the C++ standard
// fixes), and our own bounded integers, uniform doubles and Fisher-Yates shuffle (the standard
// library's distributions and std::shuffle differ between implementations). Every machine thus
// draws the same values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace lf {

// The golden-ratio increment of SplitMix64's counter.
inline constexpr std::uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;

// SplitMix64 finaliser (Steele, Lea, Flood 2014; the constants of java.util.SplittableRandom).
std::uint64_t splitmix64_mix(std::uint64_t z);

// Uniform integer in [0, bound), bound >= 1, by rejection (as OpenBSD arc4random_uniform):
// draws below 2^64 mod bound are rejected so every residue is equally likely.
std::uint64_t bounded(std::mt19937_64& rng, std::uint64_t bound);

// Uniform double in [0, 1) from the top 53 bits of one draw (as Python's random.random uses 53).
double uniform01(std::mt19937_64& rng);

// Fisher-Yates (Durstenfeld): i from the end, swap with a uniform j in [0, i].
template <typename T>
void fisher_yates(std::vector<T>& v, std::mt19937_64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(bounded(rng, i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace lf
