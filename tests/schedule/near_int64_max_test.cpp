// Every scheduler with lengths and capacities near INT64_MAX: each either returns a plan that is
// right in exact (128-bit) arithmetic or throws InvalidArgument; none reports a wrong plan because
// a sum wrapped. Ids spanning all of int64 are handled by the dynamic-CP schedulers and their
// statistics.

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdint>
#include <limits>
#include <random>
#include <set>

#include "test_support.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

__extension__ using Int128 = __int128;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// The plan holds every sample once and no pack exceeds the capacity, summed in 128 bits.
void expect_exactly_right(const Plan& plan, const testing::OwnedInput& in,
                          const ScheduleOptions& o) {
  const Int128 capacity = Int128{o.max_seqlen_per_dp_cp_rank} * o.cp;
  std::set<int64_t> seen;
  for (int64_t p = 0; p < plan.num_packs(); ++p) {
    Int128 tokens = 0;
    for (int64_t id : plan.pack_at(p)) {
      EXPECT_TRUE(seen.insert(id).second) << "sample " << id << " twice";
      tokens += in.lengths[static_cast<size_t>(id)];
    }
    EXPECT_LE(tokens, capacity) << "pack " << p;
  }
  EXPECT_EQ(seen.size(), in.lengths.size());
}

ScheduleOptions options(int dp, int cp, int multiple, int64_t m) {
  ScheduleOptions o;
  o.dp = dp;
  o.cp = cp;
  o.microbatch_multiple = multiple;
  o.max_seqlen_per_dp_cp_rank = m;
  return o;
}

TEST(NearInt64Max, HugeAndTinySamplesArePlannedExactlyOrRefused) {
  std::mt19937_64 rng(20261123);
  int planned = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int dp = 1 + static_cast<int>(rng() % 3);
    const int cp = 1 + static_cast<int>(rng() % 2);
    const int multiple = 1 + static_cast<int>(rng() % 2);
    const int64_t m = kMax / cp - static_cast<int64_t>(rng() % 8) - (trial % 3 == 0 ? kMax / 4 : 0);
    const int64_t capacity = m * cp;
    const size_t n = static_cast<size_t>(dp * multiple) * (1 + rng() % 3);
    const std::vector<int64_t> lengths = testing::near_capacity_lengths(rng, capacity, n);
    const auto in = testing::make_input(lengths, dp);
    Int128 total = 0;
    for (int64_t len : lengths) total += len;
    const ScheduleOptions o = options(dp, cp, multiple, m);
    for (const auto& name : scheduler_names(CpLayout::kFixed)) {
      SCOPED_TRACE(name + " trial " + std::to_string(trial));
      try {
        const Plan plan = make_scheduler(name)->schedule(in.view(), o);
        EXPECT_LE(total, Int128{kMax}) << "a batch whose total overflows int64 was planned";
        expect_exactly_right(plan, in, o);
        validate_plan(plan, in.view(), o);
        const PlanStats stats = evaluate_plan(plan, in.view(), in.lengths, o);
        EXPECT_GE(stats.microbatch_lower_bound, 1);
        EXPECT_LE(stats.microbatch_lower_bound, plan.num_microbatches());
        ++planned;
      } catch (const InvalidArgument&) {
        ++refused;
      }
    }
  }
  // Both outcomes occur, so neither branch above is dead.
  EXPECT_GT(planned, 100);
  EXPECT_GT(refused, 10);
}

TEST(NearInt64Max, FiveAndInt64MaxNeverShareAPack) {
  const auto in = testing::make_input({5, kMax}, 1);
  for (const auto& name : scheduler_names(CpLayout::kFixed)) {
    SCOPED_TRACE(name);
    EXPECT_THROW(make_scheduler(name)->schedule(in.view(), options(1, 1, 1, kMax)),
                 InvalidArgument);
  }
}

TEST(NearInt64Max, CapacityOverflowIsRefused) {
  const auto in = testing::make_input({5, 7, 9, 11}, 1);
  for (const auto& name : scheduler_names(CpLayout::kFixed)) {
    SCOPED_TRACE(name);
    EXPECT_THROW(make_scheduler(name)->schedule(in.view(), options(1, 4, 1, int64_t{1} << 62)),
                 InvalidArgument);
  }
}

}  // namespace
}  // namespace thdpack

namespace thdpack {
namespace {

// Ids spanning all of int64: the dense id tables (duplicate check, length by id) once computed
// their size as max - min + 1, which wraps to 0 there, and wrote past an empty table.
TEST(NearInt64Max, IdsSpanningAllOfInt64AreHandled) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> ids = {kMin, kMax, 0, -1};
  const std::vector<int64_t> lengths = {8, 4, 4, 2};
  ScheduleOptions o;
  o.cost = CostModel::megatron_workload();
  o.dp = 2;
  o.max_seqlen_per_dp_cp_rank = 8;
  for (const std::string& name : scheduler_names(CpLayout::kDynamic)) {
    SCOPED_TRACE(name);
    const Plan plan = make_scheduler(name)->schedule({ids, lengths, {}, {}}, o);
    EXPECT_NO_THROW(check_dynamic_cp_plan(plan, ids, lengths, o));
    // The same plan over ids 0..3 (the lengths looked up by position) has the same step: the
    // lengths were found by id across the whole int64 range.
    Plan renamed(o.dp, o.cp);
    for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
      renamed.begin_microbatch();
      for (CpGroup g : plan.microbatch(k).groups()) {
        for (int64_t& id : g.ids) id = std::find(ids.begin(), ids.end(), id) - ids.begin();
        renamed.add_group(g);
      }
    }
    const std::vector<int64_t> positions = {0, 1, 2, 3};
    EXPECT_EQ(evaluate_dynamic_cp_plan(plan, ids, lengths, o, o.cost).step_cost,
              evaluate_dynamic_cp_plan(renamed, positions, lengths, o, o.cost).step_cost);
  }
  const std::vector<int64_t> twice = {kMin, kMax, kMin};
  const std::vector<int64_t> three = {8, 4, 4};
  EXPECT_THROW(schedule_default_dynamic_cp(twice, three, o), InvalidArgument);
}

}  // namespace
}  // namespace thdpack
