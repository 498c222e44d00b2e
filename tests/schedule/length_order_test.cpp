// Samples by padded length (src/schedule/length_order.hpp): the ids grouped by length are a sort
// by (length descending, id ascending) on every kind of input: padded and
// unpadded lengths, lengths spanning 2^50 (the comparison sort), all equal, ids ascending,
// shuffled, sparse and negative.

#include "schedule/length_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

namespace thdpack::detail {
namespace {

std::vector<size_t> sorted_reference(const std::vector<int64_t>& ids,
                                     const std::vector<int64_t>& lengths) {
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return lengths[a] > lengths[b] || (lengths[a] == lengths[b] && ids[a] < ids[b]);
  });
  return order;
}

TEST(GroupByLength, IsASortByLengthThenIdOnEveryKindOfInput) {
  for (uint64_t seed = 0; seed < 400; ++seed) {
    std::mt19937_64 rng(seed);
    const size_t n = rng() % 3000;
    std::vector<int64_t> lengths(n);
    const int kind = static_cast<int>(seed % 4);
    for (auto& len : lengths) {
      switch (kind) {
        case 0:
          len = 64 * static_cast<int64_t>(1 + rng() % 300);
          break;  // padded
        case 1:
          len = static_cast<int64_t>(1 + rng() % 20000);
          break;  // not padded
        case 2:
          len = static_cast<int64_t>(1 + rng() % (int64_t{1} << 50));
          break;  // wide span
        default:
          len = 4096;
          break;  // all equal
      }
    }
    std::vector<int64_t> ids(n);
    std::iota(ids.begin(), ids.end(), int64_t{0});
    if (seed % 3 == 1) std::shuffle(ids.begin(), ids.end(), rng);
    if (seed % 3 == 2) {  // sparse, unsorted, negative too
      std::set<int64_t> seen;
      for (auto& id : ids) {
        do id = static_cast<int64_t>(rng()) >> 1;
        while (!seen.insert(id).second);
      }
    }
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<size_t> order = sorted_reference(ids, lengths);
    // The reference order, cut where the length changes.
    const LengthGroups groups = group_by_length(ids, lengths);
    ASSERT_EQ(groups.ids.size(), n);
    ASSERT_EQ(groups.starts.size(), groups.lengths.size() + 1);
    ASSERT_EQ(groups.starts.front(), 0u);
    ASSERT_EQ(groups.starts.back(), n);
    for (size_t g = 0; g < groups.lengths.size(); ++g) {
      ASSERT_LT(groups.starts[g], groups.starts[g + 1]);
      if (g > 0) {
        ASSERT_GT(groups.lengths[g - 1], groups.lengths[g]);
      }
      for (size_t k = groups.starts[g]; k < groups.starts[g + 1]; ++k) {
        ASSERT_EQ(groups.ids[k], ids[order[k]]);
        ASSERT_EQ(groups.lengths[g], lengths[order[k]]);
      }
    }
  }
}

}  // namespace
}  // namespace thdpack::detail
