// Megatron's sample order: which DP rank holds which sample of a global batch.

#include <gtest/gtest.h>

#include <algorithm>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/schedule/global_batch.hpp"

namespace thdpack {
namespace {

TEST(SampleOrder, MegatronDealsPositionsRoundRobin) {
  // Positions 0..7 over dp 2: rank 0 holds 0, 2, 4, 6 and rank 1 holds 1, 3, 5, 7.
  const std::vector<int64_t> positions{10, 11, 12, 13, 14, 15, 16, 17};
  EXPECT_EQ(rank_major_indices(positions, 2, SampleOrder::kMegatron),
            (std::vector<int64_t>{10, 12, 14, 16, 11, 13, 15, 17}));
  EXPECT_EQ(rank_major_indices(positions, 2, SampleOrder::kContiguous), positions);
  EXPECT_EQ(rank_major_indices(positions, 1, SampleOrder::kMegatron), positions);
}

TEST(SampleOrder, EveryRankHoldsPositionsCongruentToItsRankForManyShapes) {
  for (int dp : {1, 2, 3, 4, 8}) {
    for (int64_t per = 1; per <= 9; ++per) {
      std::vector<int64_t> positions(static_cast<size_t>(dp * per));
      for (size_t j = 0; j < positions.size(); ++j) positions[j] = static_cast<int64_t>(j);
      const auto out = rank_major_indices(positions, dp, SampleOrder::kMegatron);
      ASSERT_EQ(out.size(), positions.size());
      for (int r = 0; r < dp; ++r) {
        for (int64_t k = 0; k < per; ++k) {
          EXPECT_EQ(out[static_cast<size_t>(r * per + k)], k * dp + r);
        }
      }
    }
  }
}

TEST(SampleOrder, MakeGlobalBatchFollowsTheOrder) {
  MockConfig c;
  c.min_seq_len = 8;
  c.max_seq_len = 64;
  c.mean_seq_len = 20;
  c.lognormal_sigma = 1.0;
  c.size = 1000;
  const auto dataset = make_mock_dataset(c);
  GlobalBatchOptions o;
  o.global_batch = 12;
  o.dp = 3;
  o.capacity = 64;
  o.order = SampleOrder::kMegatron;
  const GlobalBatch b = make_global_batch(*dataset, 2, o);
  EXPECT_EQ(b.ids, (std::vector<int64_t>{24, 27, 30, 33, 25, 28, 31, 34, 26, 29, 32, 35}));
  for (size_t i = 0; i < b.ids.size(); ++i) EXPECT_EQ(b.real_lengths[i], dataset->length(b.ids[i]));
  EXPECT_EQ(b.samples_per_rank, (std::vector<int64_t>{4, 4, 4}));
}

TEST(SampleOrder, NamesRoundTripAndUnknownNamesAreRefused) {
  for (SampleOrder order : {SampleOrder::kContiguous, SampleOrder::kMegatron}) {
    EXPECT_EQ(parse_sample_order(sample_order_name(order)), order);
  }
  test_util::expect_throw_with<InvalidArgument>([] { parse_sample_order("random"); },
                                                "'contiguous' or 'megatron'");
  test_util::expect_throw_with<InvalidArgument>(
      [] {
        rank_major_indices({1, 2, 3}, 2, SampleOrder::kMegatron);
      },
      "multiple of dp=2");
}

}  // namespace
}  // namespace thdpack
