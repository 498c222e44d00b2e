#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Sums and products of user-given numbers (lengths, capacities, layout sizes, batch sizes) that
// must not wrap: each either returns the exact int64 result or throws InvalidArgument naming the
// quantity, so a capacity check can never pass because an addition overflowed. `what` is a view:
// the message is built only on overflow, so the checks cost nothing in per-sample loops.

#include <cstdint>
#include <string>
#include <string_view>

#include "thdpack/core/errors.hpp"

namespace thdpack {

/// a + b, or InvalidArgument("<what> overflows int64 (a + b)").
inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    fail(std::string(what), " overflows int64 (", std::to_string(a), " + ", std::to_string(b), ")");
  }
  return out;
}

/// a x b, or InvalidArgument("<what> overflows int64 (a x b)").
inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    fail(std::string(what), " overflows int64 (", std::to_string(a), " x ", std::to_string(b), ")");
  }
  return out;
}

/// True when a + b does not fit in int64 or exceeds `limit`: the overflow-free form of
/// `a + b > limit` for a, b >= 0.
inline bool sum_exceeds(int64_t a, int64_t b, int64_t limit) {
  return a > limit - b;
}

}  // namespace thdpack
