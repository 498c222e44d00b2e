// Every packer and bound with lengths and capacities near INT64_MAX: each either packs exactly
// right (checked in 128-bit arithmetic) or throws InvalidArgument; fills stay within (0, 1] and
// bounds below the pack count.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "test_support.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/packing/offline_packing.hpp"

namespace thdpack {
namespace {

__extension__ using Int128 = __int128;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Every item once, no bin over the capacity (lengths rounded up to the divisor).
void expect_exactly_right(const Bins& bins, const std::vector<int64_t>& lengths, int64_t capacity,
                          int64_t divisor = 1) {
  std::vector<int> seen(lengths.size(), 0);
  for (int64_t b = 0; b < bins.count(); ++b) {
    Int128 tokens = 0;
    for (int64_t item : bins.bin(b)) {
      ++seen[static_cast<size_t>(item)];
      const Int128 len = lengths[static_cast<size_t>(item)];
      tokens += (len + divisor - 1) / divisor * divisor;
    }
    EXPECT_LE(tokens, Int128{capacity}) << "bin " << b;
    EXPECT_FALSE(bins.bin(b).empty());
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "item " << i;
}

TEST(NearInt64Max, PackersPackExactlyOrRefuse) {
  std::mt19937_64 rng(7);
  int packed = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t capacity = kMax - static_cast<int64_t>(rng() % 16) - (trial % 2 ? kMax / 3 : 0);
    const auto lengths = testing::near_capacity_lengths(rng, capacity, 1 + rng() % 6);
    const int64_t divisor = trial % 5 == 0 ? 1 + static_cast<int64_t>(rng() % 64) : 1;
    Int128 total = 0;
    for (int64_t len : lengths) total += len;
    for (const PackStrategy strategy :
         {PackStrategy::kBestFitDecreasing, PackStrategy::kFirstFitDecreasing,
          PackStrategy::kNextFit}) {
      SCOPED_TRACE(pack_strategy_name(strategy) + " trial " + std::to_string(trial));
      OfflinePackOptions o;
      o.capacity = capacity;
      o.strategy = strategy;
      o.divisor = divisor;
      try {
        const OfflinePacking out = pack_offline(lengths, o);
        EXPECT_LE(total, Int128{kMax});
        expect_exactly_right(out.packs, lengths, capacity, divisor);
        EXPECT_GT(out.fill, 0.0);
        EXPECT_LE(out.fill, 1.0);
        EXPECT_GE(out.lower_bound_l1, 1);
        EXPECT_LE(out.lower_bound_l1, out.lower_bound_l2);
        EXPECT_LE(out.lower_bound_l2, out.packs.count());
        ++packed;
      } catch (const InvalidArgument&) {
        ++refused;
      }
    }
    if (divisor != 1) continue;
    try {
      expect_exactly_right(best_fit_decreasing(lengths, capacity), lengths, capacity);
      expect_exactly_right(first_fit_decreasing(lengths, capacity), lengths, capacity);
      expect_exactly_right(next_fit(lengths, capacity), lengths, capacity);
      EXPECT_LE(bins_lower_bound_l1(lengths, capacity), bins_lower_bound_l2(lengths, capacity));
    } catch (const InvalidArgument&) {
      EXPECT_GT(total, Int128{kMax}) << "refused although the total fits";
    }
  }
  EXPECT_GT(packed, 100);
  EXPECT_GT(refused, 10);
}

TEST(NearInt64Max, StreamingPackerNeverOverfillsAPack) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t capacity = kMax - static_cast<int64_t>(rng() % 16);
    const auto lengths = testing::near_capacity_lengths(rng, capacity, 1 + rng() % 8);
    StreamingPacker packer(capacity, 1 + static_cast<int64_t>(rng() % 3), 1);
    std::vector<std::vector<int64_t>> closed;
    for (size_t i = 0; i < lengths.size(); ++i)
      packer.add(static_cast<int64_t>(i), lengths[i], closed);
    packer.flush(closed);
    Bins bins;
    for (const auto& pack : closed) {
      bins.items.insert(bins.items.end(), pack.begin(), pack.end());
      bins.offsets.push_back(static_cast<int64_t>(bins.items.size()));
    }
    expect_exactly_right(bins, lengths, capacity);
  }
}

TEST(NearInt64Max, NextFitAtInt64MaxReportsATrueFillOrRefuses) {
  OfflinePackOptions o;
  o.capacity = kMax;
  o.strategy = PackStrategy::kNextFit;
  const std::vector<int64_t> one_pack = {kMax / 2, kMax / 2, 1};  // exactly kMax tokens
  const OfflinePacking out = pack_offline(one_pack, o);
  EXPECT_EQ(out.packs.count(), 1);
  EXPECT_EQ(out.fill, 1.0);
  // Two packs at this capacity hold more than INT64_MAX tokens in all.
  const std::vector<int64_t> two_packs = {kMax / 2 + 1, kMax / 2 + 1};
  EXPECT_THROW(pack_offline(two_packs, o), InvalidArgument);
}

TEST(NearInt64Max, PaddingPastInt64MaxIsRefused) {
  OfflinePackOptions o;
  o.capacity = kMax;
  o.divisor = 1024;
  const std::vector<int64_t> lengths = {kMax - 10};
  EXPECT_THROW(pack_offline(lengths, o), InvalidArgument);
}

}  // namespace
}  // namespace thdpack
