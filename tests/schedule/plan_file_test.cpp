// The one plan type and its file format: fixed- and dynamic-CP plans of every scheduler survive
// JSON (alone and in a plan file) bit for bit, and malformed text is refused with a line that says
// what and where.

#include "thdpack/schedule/plan_file.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "expect_throw.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

// A random batch planned by `scheduler` on dp x cp.
PlannedBatch random_planned(const std::string& scheduler, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ScheduleOptions o;
  o.dp = 1 + static_cast<int>(rng() % 4);
  o.cp = 1 << (rng() % 2);
  o.max_seqlen_per_dp_cp_rank = 256;
  const bool dynamic = scheduler_layout(scheduler) == CpLayout::kDynamic;
  const int64_t divisor = 2LL * o.cp * (dynamic ? o.dp : 1);
  const size_t n = static_cast<size_t>(o.dp) * (4 + rng() % 12);
  PlannedBatch b;
  b.scheduler = scheduler;
  for (size_t i = 0; i < n; ++i) {
    b.ids.push_back(static_cast<int64_t>(rng() % 1000000) * 1000 + static_cast<int64_t>(i));
    const int64_t real = 1 + static_cast<int64_t>(rng() % 300);
    b.padded_lengths.push_back((real + divisor - 1) / divisor * divisor);
  }
  b.plan = make_scheduler(scheduler)->schedule({b.ids, b.padded_lengths, {}, {}}, o);
  return b;
}

TEST(PlanType, FixedCpPlansAreGroupsOfSizeCpAtReplicaRanks) {
  const Plan plan(2, 4, {{1, 2}, {3}, {4}, {5, 6}});
  EXPECT_TRUE(plan.is_fixed_cp());
  EXPECT_EQ(plan.ranks(), 8);
  ASSERT_EQ(plan.num_microbatches(), 2);
  EXPECT_EQ(plan.microbatch(1).groups(), (std::vector<CpGroup>{{0, 4, {4}}, {4, 4, {5, 6}}}));
  EXPECT_EQ(std::vector<int64_t>(plan.pack(0, 1).begin(), plan.pack(0, 1).end()),
            std::vector<int64_t>{3});
  EXPECT_EQ(plan.microbatch(0).group_of(5).first_rank, 4);
  EXPECT_THROW(plan.microbatch(0).group_of(8), InvalidArgument);
  EXPECT_THROW(plan.microbatch(2), InvalidArgument);
  EXPECT_THROW(Plan(2, 1, {{1}, {2}, {3}}), InternalError);  // not a multiple of dp

  Plan dynamic(2, 2);
  dynamic.begin_microbatch();
  dynamic.add_group({0, 1, {7}});
  dynamic.add_group({1, 2, {8, 9}});
  dynamic.add_group({3, 1, {10}});
  EXPECT_FALSE(dynamic.is_fixed_cp());
  EXPECT_EQ(dynamic.microbatch(0).group_of(2).size, 2);
  EXPECT_EQ(dynamic.num_groups(), 3);
}

TEST(PlanFile, PlannedBatchesOfEverySchedulerRoundTripThroughJson) {
  int planned = 0;
  for (const std::string& scheduler : scheduler_names()) {
    for (uint64_t seed = 0; seed < 30; ++seed) {
      PlannedBatch b;
      try {
        b = random_planned(scheduler, seed);
      } catch (const InvalidArgument&) {
        continue;  // too few samples for a dynamic-CP layout, say
      }
      const std::string json = planned_batch_json(b);
      EXPECT_EQ(planned_batch_from_json(json), b) << scheduler << " seed " << seed;
      ++planned;
    }
  }
  EXPECT_GT(planned, 100);
}

TEST(PlanFile, AFileOfStepsReadsBackEveryPlanInOrder) {
  test_util::TempDir dir;
  const std::string path = dir.file("plans.json");
  std::vector<PlanFileStep> written;
  {
    std::ofstream out(path);
    out << "{\"format\":\"" << kPlanFileFormat << "\",\"workload\":\"any\",\"steps\":[";
    for (int64_t step = 0; step < 3; ++step) {
      PlanFileStep s;
      s.step = step;
      // Both plans of a step are of its ids (a fixed and a dynamic scheduler plan the same batch).
      PlannedBatch fixed = random_planned("balanced", 100 + static_cast<uint64_t>(step));
      s.ids = fixed.ids;
      out << (step ? "," : "") << "{\"step\":" << step << ",\"ids\":[";
      for (size_t i = 0; i < s.ids.size(); ++i) out << (i ? "," : "") << s.ids[i];
      out << "],\"plans\":{\"dp_balanced\":";
      PlannedBatch megatron = fixed;
      megatron.scheduler = "dp_balanced";
      ScheduleOptions o;
      o.dp = fixed.plan.dp();
      o.cp = fixed.plan.cp();
      o.max_seqlen_per_dp_cp_rank = 256;
      megatron.plan =
          make_scheduler("dp_balanced")->schedule({s.ids, fixed.padded_lengths, {}, {}}, o);
      out << plan_json("dp_balanced", megatron.plan, megatron.padded_lengths)
          << ",\"balanced\":" << plan_json("balanced", fixed.plan, fixed.padded_lengths) << "}}";
      s.plans = {{"dp_balanced", megatron}, {"balanced", fixed}};
      written.push_back(s);
    }
    out << "]}";
  }
  const std::vector<PlanFileStep> read = read_plan_file(path);
  ASSERT_EQ(read.size(), written.size());
  for (size_t s = 0; s < read.size(); ++s) {
    EXPECT_EQ(read[s].step, written[s].step);
    EXPECT_EQ(read[s].ids, written[s].ids);
    ASSERT_EQ(read[s].plans.size(), 2U);
    EXPECT_EQ(read[s].plans[0].first, "dp_balanced");  // file order
    EXPECT_EQ(read[s].plan("dp_balanced"), written[s].plans[0].second);
    EXPECT_EQ(read[s].plan("balanced"), written[s].plans[1].second);
  }
  test_util::expect_throw_with<InvalidArgument>([&] { read[0].plan("local"); },
                                                {"no plan of local", "dp_balanced, balanced"});
}

TEST(PlanFile, MalformedTextIsRefusedSayingWhatAndWhere) {
  const std::string good = planned_batch_json(random_planned("balanced", 3));
  auto refused = [](const std::string& json, const std::string& needle) {
    SCOPED_TRACE(json.substr(0, 80));
    test_util::expect_throw_with<InvalidArgument>([&] { planned_batch_from_json(json); }, {needle});
  };
  refused("{not json", "is not valid JSON");
  refused("[1,2]", "is not a JSON object");
  refused(R"({"scheduler":"balanced","ids":[1]})", "has no \"padded_lengths\"");
  refused(R"({"scheduler":"nope","ids":[1],"padded_lengths":[2],"dp":1,"cp":1,"microbatches":[]})",
          "nope");
  refused(R"({"scheduler":"balanced","layout":"dynamic","ids":[1],"padded_lengths":[2],"dp":1,)"
          R"("cp":1,"microbatches":[]})",
          "says layout \"dynamic\" but balanced plans fixed CP");
  refused(R"({"scheduler":"balanced","ids":[1,2],"padded_lengths":[2],"dp":1,"cp":1,)"
          R"("microbatches":[]})",
          "1 padded lengths for 2 ids");
  refused(R"({"scheduler":"balanced","ids":[1],"padded_lengths":[2],"dp":0,"cp":1,)"
          R"("microbatches":[]})",
          "planned batch.dp: must be an integer >= 1");
  refused(R"({"scheduler":"balanced","ids":[1],"padded_lengths":[2],"dp":1,"cp":1,)"
          R"("microbatches":[[{"first_rank":0,"size":1,"ids":[1.5]}]]})",
          "microbatches[0][0].ids: holds 1.5, not an integer");
  test_util::TempDir dir;
  const std::string old = dir.file("old.json");
  std::ofstream(old) << R"({"format":"thdpack-plans-v1","steps":[]})";
  test_util::expect_throw_with<InvalidArgument>([&] { read_plan_file(old); },
                                                {old, "not \"thdpack-plan-v2\""});
  test_util::expect_throw_with<InvalidArgument>([&] { read_plan_file(dir.file("missing")); },
                                                {"cannot open plan file"});
  EXPECT_NO_THROW(planned_batch_from_json(good));
}

}  // namespace
}  // namespace thdpack
