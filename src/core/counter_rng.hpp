#pragma once
// Counter-based random numbers: the value for (seed, index, stream) depends on nothing else, so a
// mock dataset can produce the length of sample i in O(1) and identically on every rank.

#include <cstdint>

namespace thdpack::detail {

/// SplitMix64 finaliser: a bijective 64-bit mix with good avalanche.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t counter_bits(uint64_t seed, uint64_t index, uint64_t stream) {
  return mix64(mix64(seed ^ (stream * 0xD1B54A32D192ED03ull)) ^ index);
}

/// Uniform double in the open interval (0, 1).
inline double counter_uniform(uint64_t seed, uint64_t index, uint64_t stream) {
  return (static_cast<double>(counter_bits(seed, index, stream) >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace thdpack::detail
