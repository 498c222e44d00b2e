// The cap on samples per pack (max_sequences_per_pack, Megatron's thd_max_packed_sequences): a
// hard constraint of every scheduler, over many random inputs; dp_balanced with the cap equals an
// independent next-fit-with-count reference.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "expect_throw.hpp"
#include "test_support.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

using testing::make_input;

// Megatron's dp_balanced with a pack closing at `cap` samples too, written from its description:
// next-fit, then the tail split to a multiple of dp·multiple.
std::vector<std::vector<int64_t>> reference_dp_balanced(const std::vector<int64_t>& lengths,
                                                        int64_t capacity, size_t cap,
                                                        int64_t multiple) {
  std::vector<std::vector<int64_t>> packs;
  int64_t sum = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (!packs.empty() && sum + lengths[i] <= capacity && packs.back().size() < cap) {
      packs.back().push_back(static_cast<int64_t>(i));
      sum += lengths[i];
    } else {
      packs.push_back({static_cast<int64_t>(i)});
      sum = lengths[i];
    }
  }
  int64_t missing = (multiple - static_cast<int64_t>(packs.size()) % multiple) % multiple;
  for (auto i = static_cast<int64_t>(packs.size()) - 1; missing > 0 && i >= 0;) {
    if (packs[static_cast<size_t>(i)].size() > 1) {
      packs.push_back({packs[static_cast<size_t>(i)].back()});
      packs[static_cast<size_t>(i)].pop_back();
      --missing;
    } else {
      --i;
    }
  }
  return packs;
}

TEST(SequenceCap, EverySchedulerKeepsTheCapAndTheContractsOverManyInputs) {
  int planned = 0, refused = 0;
  for (uint64_t seed = 0; seed < 80; ++seed) {
    std::mt19937_64 rng(seed);
    const int dp = 1 << (seed % 3);
    const int multiple = 1 + static_cast<int>(seed / 3 % 2);
    const int64_t cap = 1 + static_cast<int64_t>(seed % 5);
    const int64_t capacity = 2048;
    const size_t n = static_cast<size_t>(dp) * (8 + seed % 17);
    auto in = make_input(testing::random_lengths(rng, n, 1, capacity), dp);
    ScheduleOptions o;
    o.dp = dp;
    o.microbatch_multiple = multiple;
    o.max_seqlen_per_dp_cp_rank = capacity;
    o.cost = CostModel{1.0, 1e-3};
    o.max_sequences_per_pack = cap;
    for (const std::string& name : scheduler_names(CpLayout::kFixed)) {
      SCOPED_TRACE(name + " seed " + std::to_string(seed));
      Plan plan;
      try {
        plan = make_scheduler(name)->schedule(in.view(), o);
      } catch (const InvalidArgument& e) {
        // Only too few samples for equal counts may stop a plan.
        EXPECT_NE(std::string(e.what()).find("samples"), std::string::npos) << e.what();
        ++refused;
        continue;
      }
      ++planned;
      EXPECT_EQ(plan.num_microbatches() % multiple, 0);
      std::map<int64_t, int> seen;
      for (int64_t p = 0; p < plan.num_packs(); ++p) {
        const auto pack = plan.pack_at(p);
        EXPECT_FALSE(pack.empty());
        EXPECT_LE(static_cast<int64_t>(pack.size()), cap);
        int64_t tokens = 0;
        for (int64_t id : pack) {
          tokens += in.lengths[static_cast<size_t>(id)];
          ++seen[id];
        }
        EXPECT_LE(tokens, capacity);
      }
      EXPECT_EQ(seen.size(), n);
      for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << "sample " << id;
      if (name == "dp_balanced") {
        const auto want =
            reference_dp_balanced(in.lengths, capacity, static_cast<size_t>(cap), dp * multiple);
        ASSERT_EQ(plan.num_packs(), static_cast<int64_t>(want.size()));
        for (int64_t p = 0; p < plan.num_packs(); ++p) {
          const auto pack = plan.pack_at(p);
          EXPECT_EQ(std::vector<int64_t>(pack.begin(), pack.end()), want[static_cast<size_t>(p)]);
        }
      }
    }
  }
  EXPECT_GT(planned, 200);
  EXPECT_LT(refused, planned / 10);
}

TEST(SequenceCap, ZeroMeansNoCapAndALooseCapChangesNothing) {
  std::mt19937_64 rng(11);
  auto in = make_input(testing::random_lengths(rng, 64, 1, 1024), 4);
  ScheduleOptions o;
  o.dp = 4;
  o.max_seqlen_per_dp_cp_rank = 1024;
  for (const std::string& name : scheduler_names(CpLayout::kFixed)) {
    const Plan free = make_scheduler(name)->schedule(in.view(), o);
    o.max_sequences_per_pack = 64;
    EXPECT_EQ(make_scheduler(name)->schedule(in.view(), o), free) << name;
    o.max_sequences_per_pack = 0;
  }
}

TEST(SequenceCap, CapOfOneGivesOneSamplePerPack) {
  auto in = make_input({5, 3, 2, 2, 1, 1, 1, 1}, 2);
  ScheduleOptions o;
  o.dp = 2;
  o.max_seqlen_per_dp_cp_rank = 100;
  o.max_sequences_per_pack = 1;
  for (const std::string& name : scheduler_names(CpLayout::kFixed)) {
    const Plan plan = make_scheduler(name)->schedule(in.view(), o);
    EXPECT_EQ(plan.num_packs(), 8) << name;
  }
}

TEST(SequenceCap, NegativeCapAndGroupIdsAreRefused) {
  auto in = make_input({5, 3, 2, 2}, 2);
  ScheduleOptions o;
  o.dp = 2;
  o.max_seqlen_per_dp_cp_rank = 100;
  o.max_sequences_per_pack = -1;
  test_util::expect_throw_with<InvalidArgument>(
      [&] { make_scheduler("balanced")->schedule(in.view(), o); }, "must be >= 0");
  o.max_sequences_per_pack = 2;
  in.group_ids = {0, 0, 1, 1};
  test_util::expect_throw_with<InvalidArgument>(
      [&] { make_scheduler("balanced")->schedule(in.view(), o); }, "group ids");
}

}  // namespace
}  // namespace thdpack
