// Offline packing (include/thdpack/packing/offline_packing.hpp): pack_offline for every strategy,
// seeded shuffles, group-atomic packing, divisor padding, the radix-sort path of large inputs and
// the streaming packer. Pack files are tested in tests/data/pack_file_test.cpp.

#include "thdpack/packing/offline_packing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "expect_throw.hpp"
#include "packing/sorted_items.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;
using test_util::expect_throw_with;

constexpr PackStrategy kStrategies[] = {PackStrategy::kBestFitDecreasing,
                                        PackStrategy::kFirstFitDecreasing, PackStrategy::kNextFit};

I64 padded(const I64& lengths, int64_t divisor) {
  I64 out;
  for (int64_t len : lengths) out.push_back(round_up(len, divisor));
  return out;
}

std::vector<I64> packs_of(const Bins& bins) {
  std::vector<I64> out;
  for (int64_t p = 0; p < bins.count(); ++p)
    out.emplace_back(bins.bin(p).begin(), bins.bin(p).end());
  return out;
}

// Each pack as a sorted list of samples, the packs sorted: equal for the same packing in any order.
std::vector<I64> canonical(const Bins& bins) {
  std::vector<I64> out = packs_of(bins);
  for (auto& p : out) std::sort(p.begin(), p.end());
  std::sort(out.begin(), out.end());
  return out;
}

// Every sample exactly once, no empty pack, every pack within the capacity (padded lengths), and
// the statistics of the result consistent with the packs.
::testing::AssertionResult valid(const OfflinePacking& r, const I64& lengths,
                                 const OfflinePackOptions& o) {
  const Bins& b = r.packs;
  if (b.offsets.empty() || b.offsets.front() != 0 ||
      b.offsets.back() != static_cast<int64_t>(b.items.size())) {
    return ::testing::AssertionFailure() << "malformed offsets";
  }
  std::vector<int> seen(lengths.size(), 0);
  int64_t total = 0;
  for (int64_t p = 0; p < b.count(); ++p) {
    if (b.bin(p).empty()) return ::testing::AssertionFailure() << "pack " << p << " is empty";
    int64_t sum = 0;
    for (int64_t s : b.bin(p)) {
      if (s < 0 || s >= static_cast<int64_t>(lengths.size())) {
        return ::testing::AssertionFailure() << "pack " << p << " holds unknown sample " << s;
      }
      ++seen[static_cast<size_t>(s)];
      sum += round_up(lengths[static_cast<size_t>(s)], o.divisor);
    }
    if (sum > o.capacity) {
      return ::testing::AssertionFailure()
             << "pack " << p << " holds " << sum << " > " << o.capacity;
    }
    total += sum;
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] != 1) return ::testing::AssertionFailure() << "sample " << i << " x" << seen[i];
  }
  if (total != r.padded_tokens) {
    return ::testing::AssertionFailure() << "padded_tokens " << r.padded_tokens << " != " << total;
  }
  const I64 p = padded(lengths, o.divisor);
  if (r.lower_bound_l1 != bins_lower_bound_l1(p, o.capacity) ||
      r.lower_bound_l2 != bins_lower_bound_l2(p, o.capacity)) {
    return ::testing::AssertionFailure()
           << "bounds " << r.lower_bound_l1 << ", " << r.lower_bound_l2;
  }
  if (!(r.lower_bound_l1 <= r.lower_bound_l2 && r.lower_bound_l2 <= b.count())) {
    return ::testing::AssertionFailure() << "L1 " << r.lower_bound_l1 << " <= L2 "
                                         << r.lower_bound_l2 << " <= packs " << b.count();
  }
  const double fill =
      b.count() == 0 ? 0.0
                     : static_cast<double>(total) / (static_cast<double>(b.count()) * o.capacity);
  if (std::abs(r.fill - fill) > 1e-12) {
    return ::testing::AssertionFailure() << "fill " << r.fill << " != " << fill;
  }
  return ::testing::AssertionSuccess();
}

I64 random_lengths(std::mt19937_64& rng, size_t n, int64_t capacity) {
  std::lognormal_distribution<double> dist(std::log(static_cast<double>(capacity) / 6), 1.0);
  I64 out(n);
  for (auto& v : out) v = std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 1, capacity);
  return out;
}

// ---------------------------------------------------------------------------------------------
// pack_offline

TEST(PackOffline, EveryStrategyIsValidAndAboveTheBounds) {
  for (int seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const int64_t capacity = 64 + static_cast<int64_t>(rng() % 4000);
    const I64 lengths = random_lengths(rng, 1 + rng() % 600, capacity);
    for (PackStrategy strategy : kStrategies) {
      OfflinePackOptions o;
      o.capacity = capacity;
      o.strategy = strategy;
      const OfflinePacking r = pack_offline(lengths, o);
      ASSERT_TRUE(valid(r, lengths, o)) << pack_strategy_name(strategy);
    }
  }
}

TEST(PackOffline, StrategiesAreTheBinPackers) {
  std::mt19937_64 rng(7);
  const I64 lengths = random_lengths(rng, 500, 1000);
  OfflinePackOptions o;
  o.capacity = 1000;
  o.divisor = 4;
  const I64 p = padded(lengths, 4);
  o.strategy = PackStrategy::kBestFitDecreasing;
  EXPECT_EQ(packs_of(pack_offline(lengths, o).packs), packs_of(best_fit_decreasing(p, 1000)));
  o.strategy = PackStrategy::kFirstFitDecreasing;
  EXPECT_EQ(packs_of(pack_offline(lengths, o).packs), packs_of(first_fit_decreasing(p, 1000)));
  o.strategy = PackStrategy::kNextFit;
  EXPECT_EQ(packs_of(pack_offline(lengths, o).packs), packs_of(next_fit(p, 1000)));
}

TEST(PackOffline, BestFitNeedsNoMorePacksThanFirstFitOrNextFit) {
  // Not a theorem for every input (BFD and FFD can differ either way), but on these seeded random
  // inputs BFD never needs more packs than FFD, and both beat next-fit.
  int64_t bfd_total = 0, ffd_total = 0, nf_total = 0;
  for (int seed = 0; seed < 40; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(100 + seed));
    const int64_t capacity = 512 + static_cast<int64_t>(rng() % 8192);
    const I64 lengths = random_lengths(rng, 200 + rng() % 2000, capacity);
    OfflinePackOptions o;
    o.capacity = capacity;
    o.strategy = PackStrategy::kBestFitDecreasing;
    const int64_t bfd = pack_offline(lengths, o).packs.count();
    o.strategy = PackStrategy::kFirstFitDecreasing;
    const int64_t ffd = pack_offline(lengths, o).packs.count();
    o.strategy = PackStrategy::kNextFit;
    const int64_t nf = pack_offline(lengths, o).packs.count();
    EXPECT_LE(bfd, ffd) << "seed " << seed;
    EXPECT_LE(ffd, nf) << "seed " << seed;
    bfd_total += bfd;
    ffd_total += ffd;
    nf_total += nf;
  }
  EXPECT_LE(bfd_total, ffd_total);
  EXPECT_LT(ffd_total, nf_total);
}

TEST(PackOffline, HandExample) {
  // Capacity 10: BFD puts 6+4 and 5+5 together, then 3+2+1; next-fit follows the input.
  const I64 lengths = {5, 6, 3, 4, 5, 2, 1};
  OfflinePackOptions o;
  o.capacity = 10;
  const OfflinePacking bfd = pack_offline(lengths, o);
  EXPECT_EQ(packs_of(bfd.packs), (std::vector<I64>{{1, 3}, {0, 4}, {2, 5, 6}}));
  EXPECT_EQ(bfd.padded_tokens, 26);
  EXPECT_EQ(bfd.lower_bound_l1, 3);
  EXPECT_EQ(bfd.lower_bound_l2, 3);
  EXPECT_DOUBLE_EQ(bfd.fill, 26.0 / 30.0);
  o.strategy = PackStrategy::kNextFit;
  EXPECT_EQ(packs_of(pack_offline(lengths, o).packs),
            (std::vector<I64>{{0}, {1, 2}, {3, 4}, {5, 6}}));
  EXPECT_EQ(pack_offline(I64{}, o).packs.count(), 0);
  EXPECT_EQ(pack_offline(I64{}, o).fill, 0.0);
}

TEST(PackOffline, StrategyNames) {
  for (PackStrategy s : kStrategies) EXPECT_EQ(pack_strategy_from_name(pack_strategy_name(s)), s);
  EXPECT_EQ(pack_strategy_from_name("best-fit-decreasing"), PackStrategy::kBestFitDecreasing);
  EXPECT_EQ(pack_strategy_from_name("first-fit-decreasing"), PackStrategy::kFirstFitDecreasing);
  EXPECT_EQ(pack_strategy_from_name("nf"), PackStrategy::kNextFit);
  expect_throw_with<InvalidArgument>([] { pack_strategy_from_name("worst-fit"); },
                                     {"'worst-fit'", "bfd, ffd or next-fit"});
}

TEST(PackOffline, SeededShuffleKeepsThePackingAndIsDeterministic) {
  std::mt19937_64 rng(11);
  const I64 lengths = random_lengths(rng, 800, 2048);
  for (PackStrategy strategy :
       {PackStrategy::kBestFitDecreasing, PackStrategy::kFirstFitDecreasing}) {
    SCOPED_TRACE(pack_strategy_name(strategy));
    OfflinePackOptions o;
    o.capacity = 2048;
    o.strategy = strategy;
    const OfflinePacking plain = pack_offline(lengths, o);
    std::set<std::vector<I64>> orders;
    for (uint64_t seed : {0u, 1u, 2u, 12345u}) {
      o.shuffle_seed = seed;
      const OfflinePacking shuffled = pack_offline(lengths, o);
      ASSERT_TRUE(valid(shuffled, lengths, o));
      EXPECT_EQ(shuffled.packs.count(), plain.packs.count());
      EXPECT_EQ(canonical(shuffled.packs), canonical(plain.packs));  // the same packs
      EXPECT_DOUBLE_EQ(shuffled.fill, plain.fill);
      EXPECT_EQ(packs_of(pack_offline(lengths, o).packs), packs_of(shuffled.packs));  // per seed
      orders.insert(packs_of(shuffled.packs));
    }
    orders.insert(packs_of(plain.packs));
    EXPECT_EQ(orders.size(), 5u) << "every seed gives another pack order";
  }
  // Next-fit shuffles the samples themselves: still valid, deterministic per seed.
  OfflinePackOptions nf;
  nf.capacity = 2048;
  nf.strategy = PackStrategy::kNextFit;
  nf.shuffle_seed = 5;
  const OfflinePacking a = pack_offline(lengths, nf);
  ASSERT_TRUE(valid(a, lengths, nf));
  EXPECT_EQ(packs_of(pack_offline(lengths, nf).packs), packs_of(a.packs));
  nf.shuffle_seed.reset();
  EXPECT_NE(packs_of(pack_offline(lengths, nf).packs), packs_of(a.packs));
}

TEST(PackOffline, GroupsStayTogether) {
  for (int seed = 0; seed < 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(300 + seed));
    const int64_t capacity = 4096;
    const I64 lengths = random_lengths(rng, 400, capacity / 16);
    // Groups of 1-4 samples with arbitrary, interleaved ids.
    I64 groups(lengths.size());
    for (auto& g : groups) g = 1000 + static_cast<int64_t>(rng() % 150) * 7;
    for (PackStrategy strategy : kStrategies) {
      OfflinePackOptions o;
      o.capacity = capacity;
      o.divisor = 2;
      o.strategy = strategy;
      o.group_ids = groups;
      if (seed % 2) o.shuffle_seed = static_cast<uint64_t>(seed);
      const OfflinePacking r = pack_offline(lengths, o);
      ASSERT_TRUE(valid(r, lengths, o)) << pack_strategy_name(strategy);
      std::map<int64_t, int64_t> pack_of_group;
      for (int64_t p = 0; p < r.packs.count(); ++p) {
        for (int64_t s : r.packs.bin(p)) {
          const auto [it, added] = pack_of_group.emplace(groups[static_cast<size_t>(s)], p);
          ASSERT_EQ(it->second, p) << "group " << groups[static_cast<size_t>(s)] << " is split";
        }
      }
      // Samples of a group are adjacent in their pack and keep their input order.
      for (int64_t p = 0; p < r.packs.count(); ++p) {
        const auto pack = r.packs.bin(p);
        std::set<int64_t> closed;
        for (size_t k = 0; k < pack.size(); ++k) {
          const int64_t g = groups[static_cast<size_t>(pack[k])];
          ASSERT_FALSE(closed.count(g)) << "group " << g << " is not contiguous";
          if (k + 1 < pack.size() && groups[static_cast<size_t>(pack[k + 1])] == g) {
            ASSERT_LT(pack[k], pack[k + 1]);
          } else {
            closed.insert(g);
          }
        }
      }
    }
  }
}

TEST(PackOffline, DivisorPadsEverySample) {
  OfflinePackOptions o;
  o.capacity = 8;
  o.divisor = 4;
  const OfflinePacking r = pack_offline(I64{1, 1, 1, 1, 5}, o);
  // Padded: 4, 4, 4, 4, 8.
  EXPECT_EQ(r.padded_tokens, 24);
  EXPECT_EQ(r.packs.count(), 3);
  EXPECT_EQ(packs_of(r.packs), (std::vector<I64>{{4}, {0, 1}, {2, 3}}));
  EXPECT_EQ(r.lower_bound_l1, 3);
  EXPECT_DOUBLE_EQ(r.fill, 1.0);
  o.divisor = 1;
  EXPECT_EQ(pack_offline(I64{1, 1, 1, 1, 5}, o).packs.count(), 2);
  for (int seed = 0; seed < 10; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const I64 lengths = random_lengths(rng, 300, 1000);
    for (PackStrategy strategy : kStrategies) {
      OfflinePackOptions d;
      d.capacity = 1024;
      d.divisor = 16;
      d.strategy = strategy;
      ASSERT_TRUE(valid(pack_offline(lengths, d), lengths, d));
    }
  }
}

// Inputs of 2^22 items and more are sorted by an LSD radix sort: its order, and the packing built
// on it, must equal what std::stable_sort gives.
TEST(PackOffline, RadixSortPathMatchesStableSort) {
  const size_t n = size_t{1} << 22;  // the radix threshold
  const int64_t capacity = 70000;    // three 8-bit passes, about 60 items per length
  std::mt19937_64 rng(42);
  I64 lengths(n);
  for (auto& v : lengths) v = 1 + static_cast<int64_t>(rng() % capacity);
  // Decreasing length, ties by increasing index: (capacity - length, index) in increasing order.
  std::vector<uint64_t> keys(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = static_cast<uint64_t>(capacity - lengths[i]) << 32 | i;
  }
  std::stable_sort(keys.begin(), keys.end());
  detail::SortedItems reference;
  reference.order.resize(n);
  reference.lengths.resize(n);
  for (size_t i = 0; i < n; ++i) {
    reference.order[i] = static_cast<int64_t>(keys[i] & 0xffffffffu);
    reference.lengths[i] = capacity - static_cast<int64_t>(keys[i] >> 32);
  }
  const I64 order = order_by_decreasing_length(lengths, capacity);
  ASSERT_TRUE(order == reference.order) << "radix order differs from std::stable_sort";
  const Bins bfd = best_fit_decreasing(lengths, capacity);
  const Bins expected = detail::best_fit_decreasing_sorted(reference, capacity);
  ASSERT_TRUE(bfd.offsets == expected.offsets && bfd.items == expected.items);
  // And the packing is valid: every item once, within the capacity, at least L2 packs.
  std::vector<uint8_t> seen(n, 0);
  for (int64_t p = 0; p < bfd.count(); ++p) {
    int64_t sum = 0;
    for (int64_t item : bfd.bin(p)) {
      ++seen[static_cast<size_t>(item)];
      sum += lengths[static_cast<size_t>(item)];
    }
    ASSERT_LE(sum, capacity) << "pack " << p;
  }
  ASSERT_TRUE(std::all_of(seen.begin(), seen.end(), [](uint8_t s) { return s == 1; }));
  EXPECT_GE(bfd.count(), detail::l2_bound_of_descending(reference.lengths, capacity));
}

// ---------------------------------------------------------------------------------------------
// StreamingPacker

TEST(StreamingPacker, HandExample) {
  StreamingPacker packer(10, 2);
  std::vector<I64> closed;
  packer.add(0, 6, closed);
  packer.add(1, 7, closed);
  EXPECT_TRUE(closed.empty());
  EXPECT_EQ(packer.open_packs(), 2);
  packer.add(2, 5, closed);  // fits neither: the fullest ({1}, 7 tokens) closes
  EXPECT_EQ(closed, (std::vector<I64>{{1}}));
  packer.add(3, 4, closed);  // the least room that fits: {0} (room 4), which is then full
  EXPECT_EQ(closed, (std::vector<I64>{{1}, {0, 3}}));
  EXPECT_EQ(packer.open_packs(), 1);
  packer.add(4, 2, closed);
  packer.add(5, 9, closed);
  packer.flush(closed);  // fullest first: {5} (9), then {2, 4} (7)
  EXPECT_EQ(closed, (std::vector<I64>{{1}, {0, 3}, {5}, {2, 4}}));
  EXPECT_EQ(packer.open_packs(), 0);
}

TEST(StreamingPacker, BoundedOpenPacksNothingLostReasonableFill) {
  for (int64_t limit : {1, 2, 8, 64}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    std::mt19937_64 rng(static_cast<uint64_t>(limit));
    const int64_t capacity = 8192, divisor = 8;
    const I64 lengths = random_lengths(rng, 20000, capacity);
    StreamingPacker packer(capacity, limit, divisor);
    std::vector<I64> closed;
    for (size_t i = 0; i < lengths.size(); ++i) {
      packer.add(static_cast<int64_t>(i), lengths[i], closed);
      ASSERT_LE(packer.open_packs(), limit);
    }
    packer.flush(closed);
    ASSERT_EQ(packer.open_packs(), 0);
    std::vector<int> seen(lengths.size(), 0);
    int64_t total = 0;
    for (const I64& pack : closed) {
      ASSERT_FALSE(pack.empty());
      int64_t sum = 0;
      for (int64_t id : pack) {
        ++seen[static_cast<size_t>(id)];
        sum += round_up(lengths[static_cast<size_t>(id)], divisor);
      }
      ASSERT_LE(sum, capacity);
      total += sum;
    }
    ASSERT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
    const double fill =
        static_cast<double>(total) / (static_cast<double>(closed.size()) * capacity);
    const int64_t l2 = bins_lower_bound_l2(padded(lengths, divisor), capacity);
    // More open packs, better fill; even one open pack (next-fit) fills more than half.
    EXPECT_GT(fill, limit == 1 ? 0.5 : limit == 2 ? 0.8 : 0.9) << fill;
    if (limit >= 8) {
      EXPECT_LE(static_cast<double>(closed.size()), 1.08 * static_cast<double>(l2));
    }
  }
}

}  // namespace
}  // namespace thdpack
