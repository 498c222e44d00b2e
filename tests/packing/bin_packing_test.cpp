// Offline bin packing: validity of every packer, equality with naive reference implementations,
// lower bounds (L1 <= L2 <= heuristics, L2 <= brute-force optimum), the decreasing order, the
// large-capacity path, and input errors.

#include <gtest/gtest.h>

#include "expect_throw.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "packing/successor_set.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;
using BinList = std::vector<I64>;

BinList to_list(const Bins& bins) {
  BinList out;
  for (int64_t p = 0; p < bins.count(); ++p) {
    const auto b = bins.bin(p);
    out.emplace_back(b.begin(), b.end());
  }
  return out;
}

// Every item exactly once, every bin within capacity and non-empty, offsets well formed.
::testing::AssertionResult valid_packing(const Bins& bins, const I64& lengths, int64_t capacity) {
  if (bins.offsets.empty() || bins.offsets.front() != 0) {
    return ::testing::AssertionFailure() << "offsets must start at 0";
  }
  if (bins.offsets.back() != static_cast<int64_t>(bins.items.size())) {
    return ::testing::AssertionFailure()
           << "offsets end at " << bins.offsets.back() << ", items " << bins.items.size();
  }
  std::vector<int> seen(lengths.size(), 0);
  for (int64_t p = 0; p < bins.count(); ++p) {
    const auto b = bins.bin(p);
    if (b.empty()) return ::testing::AssertionFailure() << "bin " << p << " is empty";
    int64_t sum = 0;
    for (int64_t item : b) {
      if (item < 0 || item >= static_cast<int64_t>(lengths.size())) {
        return ::testing::AssertionFailure() << "bin " << p << " holds unknown item " << item;
      }
      ++seen[static_cast<size_t>(item)];
      sum += lengths[static_cast<size_t>(item)];
    }
    if (sum > capacity) {
      return ::testing::AssertionFailure() << "bin " << p << " holds " << sum << " > " << capacity;
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] != 1) {
      return ::testing::AssertionFailure() << "item " << i << " placed " << seen[i] << " times";
    }
  }
  return ::testing::AssertionSuccess();
}

I64 naive_decreasing_order(const I64& lengths) {
  I64 order(lengths.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return lengths[static_cast<size_t>(a)] > lengths[static_cast<size_t>(b)];
  });
  return order;
}

BinList naive_next_fit(const I64& lengths, int64_t capacity) {
  BinList bins;
  int64_t used = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (bins.empty() || used + lengths[i] > capacity) {
      bins.emplace_back();
      used = 0;
    }
    bins.back().push_back(static_cast<int64_t>(i));
    used += lengths[i];
  }
  return bins;
}

BinList naive_first_fit_decreasing(const I64& lengths, int64_t capacity) {
  BinList bins;
  I64 room;
  for (int64_t item : naive_decreasing_order(lengths)) {
    const int64_t len = lengths[static_cast<size_t>(item)];
    size_t b = 0;
    while (b < bins.size() && room[b] < len) ++b;
    if (b == bins.size()) {
      bins.emplace_back();
      room.push_back(capacity);
    }
    bins[b].push_back(item);
    room[b] -= len;
  }
  return bins;
}

// Best fit decreasing: the bin with the least room that fits; among bins with equal room, the one
// that reached that room most recently (both the room-indexed and the tree implementation).
BinList naive_best_fit_decreasing(const I64& lengths, int64_t capacity) {
  BinList bins;
  I64 room;
  I64 last_change;
  int64_t step = 0;
  for (int64_t item : naive_decreasing_order(lengths)) {
    const int64_t len = lengths[static_cast<size_t>(item)];
    int64_t best = -1;
    for (size_t b = 0; b < bins.size(); ++b) {
      if (room[b] < len) continue;
      if (best < 0) {
        best = static_cast<int64_t>(b);
        continue;
      }
      const auto cur = static_cast<size_t>(best);
      if (room[b] < room[cur] || (room[b] == room[cur] && last_change[b] > last_change[cur])) {
        best = static_cast<int64_t>(b);
      }
    }
    if (best < 0) {
      best = static_cast<int64_t>(bins.size());
      bins.emplace_back();
      room.push_back(capacity);
      last_change.push_back(0);
    }
    const auto b = static_cast<size_t>(best);
    bins[b].push_back(item);
    room[b] -= len;
    last_change[b] = ++step;
  }
  return bins;
}

std::multiset<int64_t> rooms_of(const BinList& bins, const I64& lengths, int64_t capacity) {
  std::multiset<int64_t> rooms;
  for (const auto& b : bins) {
    int64_t sum = 0;
    for (int64_t item : b) sum += lengths[static_cast<size_t>(item)];
    rooms.insert(capacity - sum);
  }
  return rooms;
}

// Martello–Toth L2 straight from the definition, every α in [0, C/2].
int64_t naive_l2(const I64& lengths, int64_t capacity) {
  int64_t best = 0;
  for (int64_t alpha = 0; 2 * alpha <= capacity; ++alpha) {
    int64_t j1 = 0, j2 = 0, j2_sum = 0, j3_sum = 0;
    for (int64_t w : lengths) {
      if (w > capacity - alpha) {
        ++j1;
      } else if (2 * w > capacity) {
        ++j2;
        j2_sum += w;
      } else if (w >= alpha) {
        j3_sum += w;
      }
    }
    const int64_t spare = j2 * capacity - j2_sum;
    const int64_t extra = j3_sum > spare ? (j3_sum - spare + capacity - 1) / capacity : 0;
    best = std::max(best, j1 + j2 + extra);
  }
  return best;
}

// Exact optimum by branch and bound (n <= ~12).
int64_t brute_force_optimum(const I64& lengths, int64_t capacity) {
  I64 sorted = lengths;
  std::sort(sorted.rbegin(), sorted.rend());
  int64_t best = static_cast<int64_t>(sorted.size());
  I64 room;
  std::function<void(size_t)> place = [&](size_t i) {
    if (static_cast<int64_t>(room.size()) >= best) return;
    if (i == sorted.size()) {
      best = static_cast<int64_t>(room.size());
      return;
    }
    std::set<int64_t> tried;  // bins with equal room are interchangeable
    for (size_t b = 0; b < room.size(); ++b) {
      if (room[b] < sorted[i] || !tried.insert(room[b]).second) continue;
      room[b] -= sorted[i];
      place(i + 1);
      room[b] += sorted[i];
    }
    room.push_back(capacity - sorted[i]);
    place(i + 1);
    room.pop_back();
  };
  place(0);
  return best;
}

I64 random_lengths(std::mt19937_64& rng, size_t n, int64_t capacity) {
  I64 lengths(n);
  const int kind = static_cast<int>(rng() % 4);
  for (auto& len : lengths) {
    switch (kind) {
      case 0:  // uniform over the whole range
        len = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity));
        break;
      case 1:  // many small items
        len = 1 + static_cast<int64_t>(rng() %
                                       static_cast<uint64_t>(std::max<int64_t>(1, capacity / 8)));
        break;
      case 2:  // few distinct values: lots of ties
        len = std::max<int64_t>(1, capacity * static_cast<int64_t>(1 + rng() % 6) / 7);
        break;
      default:  // around half the capacity
        len = std::clamp<int64_t>(capacity / 2 + static_cast<int64_t>(rng() % 11) - 5, 1, capacity);
        break;
    }
  }
  return lengths;
}

// ---------------------------------------------------------------------------------------------
// Hand examples

TEST(BinPacking, HandExamples) {
  const I64 lengths = {5, 7, 3, 2, 4, 6};  // capacity 10
  // Next fit in input order: [5] [7,3] [2,4] [6].
  EXPECT_EQ(to_list(next_fit(lengths, 10)), (BinList{{0}, {1, 2}, {3, 4}, {5}}));
  // Decreasing order: 7(1) 6(5) 5(0) 4(4) 3(2) 2(3).
  // FFD: 7 -> b0; 6 -> b1; 5 -> b2; 4 -> b1 (room 4); 3 -> b0 (room 3); 2 -> b2 (room 5).
  EXPECT_EQ(to_list(first_fit_decreasing(lengths, 10)), (BinList{{1, 2}, {5, 4}, {0, 3}}));
  // BFD: 7 -> b0 (3 left); 6 -> b1 (4 left); 5 -> b2 (5 left); 4 -> b1 (least room that fits:
  // 4); 3 -> b0; 2 -> b2.
  EXPECT_EQ(to_list(best_fit_decreasing(lengths, 10)), (BinList{{1, 2}, {5, 4}, {0, 3}}));
  EXPECT_EQ(bins_lower_bound_l1(lengths, 10), 3);
  EXPECT_EQ(bins_lower_bound_l2(lengths, 10), 3);
}

TEST(BinPacking, BestFitTakesTheTightestBinNotTheFirst) {
  // Capacity 10, decreasing order 7(0) 4(1) 4(2) 2(3): 7 -> b0 (room 3); 4 -> b1 (room 6);
  // 4 -> b1 (room 2); 2 -> FFD: b0, the first bin with room; BFD: b1, the tightest (2 < 3).
  const I64 lengths = {7, 4, 4, 2};
  EXPECT_EQ(to_list(first_fit_decreasing(lengths, 10)), (BinList{{0, 3}, {1, 2}}));
  EXPECT_EQ(to_list(best_fit_decreasing(lengths, 10)), (BinList{{0}, {1, 2, 3}}));
}

TEST(BinPacking, EmptyInput) {
  const I64 none;
  EXPECT_EQ(best_fit_decreasing(none, 10).count(), 0);
  EXPECT_EQ(first_fit_decreasing(none, 10).count(), 0);
  EXPECT_EQ(next_fit(none, 10).count(), 0);
  EXPECT_EQ(bins_lower_bound_l1(none, 10), 0);
  EXPECT_EQ(bins_lower_bound_l2(none, 10), 0);
  EXPECT_TRUE(order_by_decreasing_length(none, 10).empty());
}

TEST(BinPacking, ItemsEqualToCapacityGetABinEach) {
  const I64 lengths = {10, 10, 10, 10};
  for (const Bins& b : {best_fit_decreasing(lengths, 10), first_fit_decreasing(lengths, 10),
                        next_fit(lengths, 10)}) {
    EXPECT_EQ(b.count(), 4);
    EXPECT_TRUE(valid_packing(b, lengths, 10));
  }
  EXPECT_EQ(bins_lower_bound_l1(lengths, 10), 4);
  EXPECT_EQ(bins_lower_bound_l2(lengths, 10), 4);
}

// ---------------------------------------------------------------------------------------------
// Against naive references

TEST(BinPacking, RandomInputsMatchTheNaivePackers) {
  constexpr int kCases = 2000;
  for (int seed = 0; seed < kCases; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const int64_t capacity = rng() % 4 == 0 ? 1 + static_cast<int64_t>(rng() % 16)
                                            : 1 + static_cast<int64_t>(rng() % 5000);
    const size_t n = rng() % 150;
    const I64 lengths = random_lengths(rng, n, capacity);

    const Bins nf = next_fit(lengths, capacity);
    ASSERT_TRUE(valid_packing(nf, lengths, capacity));
    ASSERT_EQ(to_list(nf), naive_next_fit(lengths, capacity));

    const Bins ffd = first_fit_decreasing(lengths, capacity);
    ASSERT_TRUE(valid_packing(ffd, lengths, capacity));
    ASSERT_EQ(to_list(ffd), naive_first_fit_decreasing(lengths, capacity));

    const Bins bfd = best_fit_decreasing(lengths, capacity);
    ASSERT_TRUE(valid_packing(bfd, lengths, capacity));
    const BinList naive_bfd = naive_best_fit_decreasing(lengths, capacity);
    ASSERT_EQ(bfd.count(), static_cast<int64_t>(naive_bfd.size()));
    ASSERT_EQ(rooms_of(to_list(bfd), lengths, capacity), rooms_of(naive_bfd, lengths, capacity));
    ASSERT_EQ(to_list(bfd), naive_bfd);

    const int64_t l1 = bins_lower_bound_l1(lengths, capacity);
    const int64_t l2 = bins_lower_bound_l2(lengths, capacity);
    ASSERT_LE(l1, l2);
    ASSERT_LE(l2, ffd.count());
    ASSERT_LE(l2, bfd.count());
  }
}

TEST(BinPacking, LargerInputsMatchTheNaivePackers) {
  // Larger capacities exercise every level of the successor set and the counting sort.
  for (int seed = 0; seed < 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(1000 + seed));
    const int64_t capacity = 1 + static_cast<int64_t>(rng() % 2000000);
    const size_t n = 500 + rng() % 1500;
    const I64 lengths = random_lengths(rng, n, capacity);
    const Bins ffd = first_fit_decreasing(lengths, capacity);
    ASSERT_TRUE(valid_packing(ffd, lengths, capacity));
    ASSERT_EQ(to_list(ffd), naive_first_fit_decreasing(lengths, capacity));
    const Bins bfd = best_fit_decreasing(lengths, capacity);
    ASSERT_TRUE(valid_packing(bfd, lengths, capacity));
    ASSERT_EQ(to_list(bfd), naive_best_fit_decreasing(lengths, capacity));
    ASSERT_LE(bins_lower_bound_l2(lengths, capacity), bfd.count());
  }
}

// ---------------------------------------------------------------------------------------------
// Lower bounds

TEST(BinLowerBound, HandExamplesOfL2) {
  // Capacity 10, {6,6,6,5,5,5}: L1 = ceil(33/10) = 4. L2 at α = 5: three items > C-α = 5 need a
  // bin each, no item in (5, 5], items in [5, 5] sum to 15 with no spare room: +ceil(15/10) = 2,
  // so L2 = 5. That is the optimum: a 6 shares a bin with no other item, the 5s pair up.
  EXPECT_EQ(bins_lower_bound_l1(I64{6, 6, 6, 5, 5, 5}, 10), 4);
  EXPECT_EQ(bins_lower_bound_l2(I64{6, 6, 6, 5, 5, 5}, 10), 5);
  EXPECT_EQ(brute_force_optimum(I64{6, 6, 6, 5, 5, 5}, 10), 5);
  // Capacity 11: 6+5 fits, so three bins suffice and L2 must not claim more (5 is "small":
  // 2·5 <= 11).
  EXPECT_EQ(bins_lower_bound_l2(I64{6, 6, 6, 5, 5, 5}, 11), 3);
  // Six items just over half: one bin each; L1 says only 4.
  EXPECT_EQ(bins_lower_bound_l1(I64{6, 6, 6, 6, 6, 6}, 10), 4);
  EXPECT_EQ(bins_lower_bound_l2(I64{6, 6, 6, 6, 6, 6}, 10), 6);
  // Capacity 10, {9,9,9,2}: L1 = ceil(29/10) = 3; at α = 2 the 9s need three bins with room 1
  // each, and the 2 needs a fourth.
  EXPECT_EQ(bins_lower_bound_l1(I64{9, 9, 9, 2}, 10), 3);
  EXPECT_EQ(bins_lower_bound_l2(I64{9, 9, 9, 2}, 10), 4);
  // Small items fill the room big items leave (α = 0): capacity 10, {7,7,3,3,3}: the 7s leave
  // 6, the 3s sum to 9, so one more bin: 3. Optimum 3.
  EXPECT_EQ(bins_lower_bound_l2(I64{7, 7, 3, 3, 3}, 10), 3);
  // Capacity 100, {60, 60, 30, 30, 30}: α = 30: 60s in (50, 70] leave 80, the 30s sum to 90:
  // 2 + ceil(10/100) = 3. α = 0 gives the same. Optimum: 60+30, 60+30, 30 = 3.
  EXPECT_EQ(bins_lower_bound_l2(I64{60, 60, 30, 30, 30}, 100), 3);
  EXPECT_EQ(bins_lower_bound_l1(I64{60, 60, 30, 30, 30}, 100), 3);
  // Capacity 100, {60, 60, 41, 41, 41}: α = 41: items > 59 (the 60s) need their own bins, the
  // 41s sum to 123 with no spare: 2 + ceil(123/100) = 4. Optimum: 60, 60, 41+41, 41 = 4.
  EXPECT_EQ(bins_lower_bound_l1(I64{60, 60, 41, 41, 41}, 100), 3);
  EXPECT_EQ(bins_lower_bound_l2(I64{60, 60, 41, 41, 41}, 100), 4);
  EXPECT_EQ(brute_force_optimum(I64{60, 60, 41, 41, 41}, 100), 4);
}

TEST(BinLowerBound, OrderedAndBelowTheOptimum) {
  constexpr int kCases = 1500;
  for (int seed = 0; seed < kCases; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const int64_t capacity = 1 + static_cast<int64_t>(rng() % 100);
    const size_t n = rng() % 11;  // n <= 10
    const I64 lengths = random_lengths(rng, n, capacity);
    const int64_t l1 = bins_lower_bound_l1(lengths, capacity);
    const int64_t l2 = bins_lower_bound_l2(lengths, capacity);
    const int64_t opt = brute_force_optimum(lengths, capacity);
    const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
    ASSERT_EQ(l1, (total + capacity - 1) / capacity);
    ASSERT_EQ(l2, naive_l2(lengths, capacity));
    ASSERT_LE(l1, l2);
    ASSERT_LE(l2, opt);
    ASSERT_LE(opt, first_fit_decreasing(lengths, capacity).count());
    ASSERT_LE(opt, best_fit_decreasing(lengths, capacity).count());
    // Items larger than half the capacity pairwise exclude each other.
    const auto big = std::count_if(lengths.begin(), lengths.end(),
                                   [&](int64_t len) { return 2 * len > capacity; });
    ASSERT_GE(l2, big);
  }
}

TEST(BinLowerBound, L2MatchesTheDefinition) {
  for (int seed = 0; seed < 500; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const int64_t capacity = 1 + static_cast<int64_t>(rng() % 300);
    const I64 lengths = random_lengths(rng, rng() % 60, capacity);
    ASSERT_EQ(bins_lower_bound_l2(lengths, capacity), naive_l2(lengths, capacity));
  }
}

// ---------------------------------------------------------------------------------------------
// Decreasing order

TEST(BinOrder, StableDescendingOnBothPaths) {
  for (int seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const size_t n = rng() % 300;
    // Small capacity: counting sort (capacity <= 16 n + 65536).
    const int64_t small_capacity = 1 + static_cast<int64_t>(rng() % 200);
    const I64 small = random_lengths(rng, n, small_capacity);
    ASSERT_EQ(order_by_decreasing_length(small, small_capacity), naive_decreasing_order(small));
    // Large capacity: comparison sort.
    const int64_t large_capacity = int64_t{1} << 40;
    I64 large(n);
    for (auto& len : large) {
      len = rng() % 2 ? 1 + static_cast<int64_t>(rng() % 20)
                      : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(large_capacity));
    }
    ASSERT_EQ(order_by_decreasing_length(large, large_capacity), naive_decreasing_order(large));
  }
}

TEST(BinOrder, TiesKeepInputOrder) {
  const I64 lengths = {3, 5, 3, 5, 1, 3};
  const I64 want = {1, 3, 0, 2, 5, 4};
  EXPECT_EQ(order_by_decreasing_length(lengths, 5), want);               // counting path
  EXPECT_EQ(order_by_decreasing_length(lengths, 1 << 30), want);         // comparison path
  EXPECT_EQ(order_by_decreasing_length(lengths, 16 * 6 + 65536), want);  // at the threshold
  EXPECT_EQ(order_by_decreasing_length(lengths, 16 * 6 + 65537), want);  // just above
}

TEST(BinOrder, InvalidLengthsAreRejected) {
  EXPECT_THROW(order_by_decreasing_length(I64{3, 0, 2}, 10), InvalidArgument);
  EXPECT_THROW(order_by_decreasing_length(I64{3, 11, 2}, 10), InvalidArgument);
  EXPECT_THROW(order_by_decreasing_length(I64{3, -4}, 10), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Capacity beyond the indexed structures (> 2^26)

TEST(BinPacking, CapacityAboveTwoToThe26) {
  for (int seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const int64_t capacity =
        seed % 2 ? (int64_t{1} << 26) + 1
                 : (int64_t{1} << 26) + 1 + static_cast<int64_t>(rng() % (uint64_t{1} << 40));
    const size_t n = rng() % 120;
    const I64 lengths = random_lengths(rng, n, capacity);
    const Bins bfd = best_fit_decreasing(lengths, capacity);
    ASSERT_TRUE(valid_packing(bfd, lengths, capacity));
    const BinList naive_bfd = naive_best_fit_decreasing(lengths, capacity);
    ASSERT_EQ(rooms_of(to_list(bfd), lengths, capacity), rooms_of(naive_bfd, lengths, capacity));
    ASSERT_EQ(to_list(bfd), naive_bfd);
    const Bins ffd = first_fit_decreasing(lengths, capacity);
    ASSERT_TRUE(valid_packing(ffd, lengths, capacity));
    ASSERT_EQ(to_list(ffd), naive_first_fit_decreasing(lengths, capacity));
    ASSERT_EQ(to_list(next_fit(lengths, capacity)), naive_next_fit(lengths, capacity));
    const int64_t l2 = bins_lower_bound_l2(lengths, capacity);
    ASSERT_LE(bins_lower_bound_l1(lengths, capacity), l2);
    ASSERT_LE(l2, bfd.count());
  }
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(BinPackingErrors, InvalidItemsAreNamed) {
  using Packer = std::function<void(const I64&, int64_t)>;
  const std::vector<std::pair<std::string, Packer>> packers = {
      {"bfd", [](const I64& l, int64_t c) { best_fit_decreasing(l, c); }},
      {"ffd", [](const I64& l, int64_t c) { first_fit_decreasing(l, c); }},
      {"next_fit", [](const I64& l, int64_t c) { next_fit(l, c); }},
      {"l1", [](const I64& l, int64_t c) { bins_lower_bound_l1(l, c); }},
      {"l2", [](const I64& l, int64_t c) { bins_lower_bound_l2(l, c); }},
  };
  for (const auto& [name, packer] : packers) {
    SCOPED_TRACE(name);
    test_util::expect_throw_with<InvalidArgument>(
        [&] {
          packer(I64{4, 5, 0, 3}, 10);
        },
        {"item 2", "0"});
    test_util::expect_throw_with<InvalidArgument>(
        [&] {
          packer(I64{4, -3}, 10);
        },
        {"item 1", "-3"});
    test_util::expect_throw_with<InvalidArgument>(
        [&] {
          packer(I64{4, 5, 6, 11, 0}, 10);
        },
        {"item 3", "11", "10"});
    EXPECT_THROW(packer(I64{1}, 0), InvalidArgument);
    EXPECT_THROW(packer(I64{}, -5), InvalidArgument);
  }
}

TEST(BinPackingErrors, CheckItemsFitUsesTheGivenNoun) {
  test_util::expect_throw_with<InvalidArgument>(
      [] {
        check_items_fit(I64{5, 40, 3}, 32, "sample");
      },
      {"sample 1", "40", "32", "raise max_seqlen_per_dp_cp_rank (-M)"});
  test_util::expect_throw_with<InvalidArgument>(
      [] {
        check_items_fit(I64{5, 0}, 32, "group");
      },
      {"group 1"});
  EXPECT_NO_THROW(check_items_fit(I64{1, 32}, 32, "sample"));
}

// ---------------------------------------------------------------------------------------------
// The successor set behind best fit

TEST(BinSuccessorSet, MatchesStdSet) {
  for (int seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const int64_t universe = seed < 20 ? 1 + static_cast<int64_t>(rng() % 200)
                                       : 1 + static_cast<int64_t>(rng() % 400000);
    detail::SuccessorSet set(universe);
    std::set<int64_t> ref;
    auto random_value = [&] {
      return static_cast<int64_t>(rng() % static_cast<uint64_t>(universe));
    };
    for (int op = 0; op < 3000; ++op) {
      const int64_t x = random_value();
      switch (rng() % 3) {
        case 0:
          if (!ref.count(x)) {
            set.insert(x);
            ref.insert(x);
          }
          break;
        case 1:
          if (ref.count(x)) {
            set.erase(x);
            ref.erase(x);
          }
          break;
        default: {
          const auto it = ref.lower_bound(x);
          ASSERT_EQ(set.next(x), it == ref.end() ? -1 : *it) << "next(" << x << ")";
        }
      }
    }
    // Walk the whole set in order.
    int64_t x = set.next(0);
    for (int64_t want : ref) {
      ASSERT_EQ(x, want);
      x = want + 1 < universe ? set.next(want + 1) : -1;
    }
    ASSERT_EQ(x, -1);
  }
}

}  // namespace
}  // namespace thdpack
