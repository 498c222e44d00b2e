// checked_add / checked_mul / sum_exceeds against 128-bit arithmetic, at and around the int64
// limits, and Topology sizes whose product overflows.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/topology.hpp"

namespace thdpack {
namespace {

__extension__ using Int128 = __int128;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

bool fits(Int128 v) {
  return v >= kMin && v <= kMax;
}

TEST(CheckedArithmetic, MatchesExactArithmeticNearTheLimits) {
  std::mt19937_64 rng(5);
  const int64_t edges[] = {0,
                           1,
                           -1,
                           2,
                           -2,
                           3,
                           kMax,
                           kMax - 1,
                           kMin,
                           kMin + 1,
                           kMax / 2,
                           kMax / 2 + 1,
                           int64_t{1} << 31,
                           int64_t{1} << 32,
                           3037000499,
                           3037000500};
  std::vector<int64_t> values(std::begin(edges), std::end(edges));
  for (int i = 0; i < 200; ++i) values.push_back(static_cast<int64_t>(rng()));
  int checked = 0;
  for (int64_t a : values) {
    for (int64_t b : values) {
      const Int128 sum = Int128{a} + b, product = Int128{a} * b;
      if (fits(sum)) {
        EXPECT_EQ(checked_add(a, b, "x"), static_cast<int64_t>(sum));
      } else {
        EXPECT_THROW(checked_add(a, b, "x"), InvalidArgument);
      }
      if (fits(product)) {
        EXPECT_EQ(checked_mul(a, b, "x"), static_cast<int64_t>(product));
      } else {
        EXPECT_THROW(checked_mul(a, b, "x"), InvalidArgument);
      }
      if (a >= 0 && b >= 0) {
        EXPECT_EQ(sum_exceeds(a, b, kMax - 5), sum > kMax - 5);
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 40000);
}

TEST(CheckedArithmetic, MessageNamesTheQuantity) {
  try {
    checked_mul(int64_t{1} << 62, 4, "the capacity M x cp");
    FAIL() << "no throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("the capacity M x cp overflows int64"), std::string::npos)
        << e.what();
  }
}

TEST(CheckedArithmetic, TopologyWhoseWorldOverflowsIsRefused) {
  EXPECT_THROW(Topology(TopologyConfig{.tp = 65536, .cp = 1, .dp = 65536}), InvalidArgument);
  EXPECT_THROW(Topology(TopologyConfig{.tp = 1 << 30, .cp = 1 << 30, .dp = 1 << 30, .pp = 4}),
               InvalidArgument);
  EXPECT_EQ(Topology(TopologyConfig{.tp = 1 << 15, .cp = 1, .dp = 1 << 15}).world_size(), 1 << 30);
}

}  // namespace
}  // namespace thdpack
