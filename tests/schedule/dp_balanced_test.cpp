// Megatron-exact dp_balanced: hand-checked cases, including the tail split and its failure.

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

using testing::make_input;

ScheduleOptions options(int dp, int64_t m, int multiple = 1, int cp = 1) {
  ScheduleOptions o;
  o.dp = dp;
  o.cp = cp;
  o.max_seqlen_per_dp_cp_rank = m;
  o.microbatch_multiple = multiple;
  return o;
}

std::vector<std::vector<int64_t>> packs_of(const Plan& plan) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t p = 0; p < plan.num_packs(); ++p) {
    auto pack = plan.pack_at(p);
    out.emplace_back(pack.begin(), pack.end());
  }
  return out;
}

TEST(DpBalanced, NextFitInGlobalOrderWithoutSplitWhenCountIsAMultiple) {
  // C = 10: [3,3,3] [6,4] [5,2,2] [2,2] -> 4 packs, a multiple of dp=2.
  const auto in = make_input({3, 3, 3, 6, 4, 5, 2, 2, 2, 2}, 2);
  const Plan plan = make_scheduler("dp_balanced")->schedule(in.view(), options(2, 10));
  EXPECT_EQ(packs_of(plan),
            (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4}, {5, 6, 7}, {8, 9}}));
  // Pack j goes to replica j mod dp in step j div dp.
  EXPECT_EQ(plan.num_microbatches(), 2);
  EXPECT_EQ(plan.pack(1, 0)[0], 5);
  EXPECT_EQ(plan.pack(0, 1)[0], 3);
}

TEST(DpBalanced, TailSplitPopsLastIdsOfTheNearestMultiSamplePack) {
  // C = 10, a multiple of 4 packs: next fit gives [4,4] [4,4] [4] -> 3 packs; one more needed.
  // Walking back from the last pack: pack 2 holds one sample, pack 1 holds two -> its last id (3)
  // becomes a new pack.
  const auto in5 = make_input({4, 4, 4, 4, 4}, 1);
  ScheduleOptions o = options(1, 10, 4);  // multiple 4 through the VPP group with dp 1
  const Plan plan = make_scheduler("dp_balanced")->schedule(in5.view(), o);
  EXPECT_EQ(packs_of(plan), (std::vector<std::vector<int64_t>>{{0, 1}, {2}, {4}, {3}}));
}

TEST(DpBalanced, TailSplitKeepsPoppingTheSamePackBeforeWalkingBack) {
  // C = 12, dp = 2, multiple 3 (VPP group) -> packs must be a multiple of 6.
  // Next fit: [3,3,3,3] [3,3,3,3] -> 2 packs; 4 more needed: pack 1 gives 7, 6, 5 (it keeps
  // id 4 only), then pack 0 gives 3.
  const auto in = make_input({3, 3, 3, 3, 3, 3, 3, 3}, 2);
  const Plan plan = make_scheduler("dp_balanced")->schedule(in.view(), options(2, 12, 3));
  EXPECT_EQ(packs_of(plan),
            (std::vector<std::vector<int64_t>>{{0, 1, 2}, {4}, {7}, {6}, {5}, {3}}));
  EXPECT_EQ(plan.num_microbatches(), 3);
}

TEST(DpBalanced, TailSplitFailsWithAClearErrorWhenNoPackCanBeSplit) {
  // Every sample fills a pack: 3 packs, dp 2 needs 4, nothing to split.
  const auto in = make_input({10, 10, 10, 10}, 2);
  auto three = make_input({10, 10, 10}, 1);
  three.samples_per_rank = {2, 1};
  test_util::expect_throw_with<InvalidArgument>(
      [&] { make_scheduler("dp_balanced")->schedule(three.view(), options(2, 10)); },
      "cannot be split");
  // With four samples it works: one per pack.
  const Plan plan = make_scheduler("dp_balanced")->schedule(in.view(), options(2, 10));
  EXPECT_EQ(plan.num_packs(), 4);
}

TEST(DpBalanced, RejectsASampleLongerThanTheCapacity) {
  // Megatron emits an empty first pack here; we refuse with the fix in the message.
  const auto in = make_input({11, 3}, 1);
  test_util::expect_throw_with<InvalidArgument>(
      [&] { make_scheduler("dp_balanced")->schedule(in.view(), options(1, 10)); },
      "raise max_seqlen_per_dp_cp_rank (-M)");
}

TEST(DpBalanced, CapacityIsMTimesCp) {
  // M = 8, cp = 2 -> C = 16: [8,8] fits one pack.
  const auto in = make_input({8, 8}, 1);
  const Plan plan = make_scheduler("dp_balanced")->schedule(in.view(), options(1, 8, 1, 2));
  EXPECT_EQ(plan.num_packs(), 1);
}

TEST(DpBalanced, RejectsGroups) {
  auto in = make_input({1, 2, 3, 4}, 2);
  in.group_ids = {0, 0, 1, 1};
  test_util::expect_throw_with<InvalidArgument>(
      [&] { make_scheduler("dp_balanced")->schedule(in.view(), options(2, 10)); }, "group");
}

}  // namespace
}  // namespace thdpack
