// Dynamic-CP plans of large batches from a stride sample's plan (src/schedule/
// dynamic_cp_template.hpp): every replicated plan keeps the dynamic-CP contracts; no micro-batch
// of a copy takes longer than the template's (but those holding a sample past the last block);
// the step it reports is the plan's modeled step exactly; the cases the replication cannot carry
// are declined, not planned wrongly; and samples past the last block that no group has room for
// get micro-batches of their own.

#include "schedule/dynamic_cp_template.hpp"
#include "schedule/dynamic_cp_step.hpp"
#include "schedule/length_by_id.hpp"
#include "schedule/length_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/flops.hpp"

namespace thdpack::detail {
namespace {

CostModel full_cost() {
  return CostModel::from_model(model_preset("llama3-8b"), kDefaultGpuTflops, 2, kDefaultCpLinkGBps,
                               kDefaultCpStepOverheadUs);
}

/// The micro-batch's height: its slowest group's summed time.
double height(const DraftMicrobatch& mb, const std::vector<int64_t>& length_of_id,
              const CostModel& cost) {
  double slowest = 0;
  for (const CpGroup& g : mb.groups) {
    double t = 0;
    for (const int64_t id : g.ids) t += cost.time(length_of_id[static_cast<size_t>(id)], g.size);
    slowest = std::max(slowest, t);
  }
  return slowest;
}

TEST(PlanByTemplate, CopiesKeepTheContractsAndNoMicrobatchTakesLongerThanTheTemplates) {
  const CostModel full = full_cost();
  int planned = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    std::mt19937_64 rng(seed);
    ScheduleOptions o;
    o.cost = CostModel::megatron_workload();
    o.dp = std::vector<int>{2, 3, 4, 8, 16}[rng() % 5];
    o.cp = std::vector<int>{1, 2, 4}[rng() % 3];
    o.microbatch_multiple = std::vector<int>{1, 1, 2, 4}[rng() % 4];
    o.min_cp = rng() % 5 == 0 ? 2 : 1;
    if (o.min_cp > o.ranks()) o.min_cp = 1;
    o.max_seqlen_per_dp_cp_rank = 1024;
    o.cost = seed % 2 ? full : CostModel::megatron_workload();
    const int64_t template_samples = 32 + static_cast<int64_t>(rng() % 64);
    const auto n = static_cast<size_t>(template_samples * (2 + static_cast<int64_t>(rng() % 30)) +
                                       static_cast<int64_t>(rng() % 50));
    int widest = 1;
    while (widest * 2 <= o.ranks()) widest *= 2;
    const int64_t pad = seed % 3 ? 2 * o.ranks() : 1;
    std::lognormal_distribution<double> dist(std::log(400.0), 1.2);
    std::vector<int64_t> lengths(n);
    for (auto& len : lengths) {
      const auto raw = std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 1, 1024 * widest);
      len = std::max<int64_t>(pad, raw / pad * pad);
    }
    std::vector<int64_t> ids(n);
    std::iota(ids.begin(), ids.end(), int64_t{0});
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int64_t> length_of_id(n);
    for (size_t i = 0; i < n; ++i) length_of_id[static_cast<size_t>(ids[i])] = lengths[i];

    DraftPlan tmpl;
    std::vector<int64_t> template_lengths;
    const bool ours = seed % 4 < 2;
    auto planner = [&](std::span<const int64_t> t_ids, std::span<const int64_t> t_lengths,
                       const ScheduleOptions& t_o) {
      template_lengths.assign(t_lengths.begin(), t_lengths.end());
      tmpl = to_draft(ours ? schedule_balanced_dynamic_cp(t_ids, t_lengths, t_o)
                           : schedule_default_dynamic_cp(t_ids, t_lengths, t_o));
      return tmpl;
    };
    SCOPED_TRACE("seed " + std::to_string(seed) + " n " + std::to_string(n) + " G " +
                 std::to_string(o.ranks()));
    const LengthGroups grouped = group_by_length(ids, lengths);
    std::optional<TemplatePlan> scored;
    try {
      scored = plan_by_template(grouped, o, template_samples, planner);
    } catch (const InvalidArgument&) {
      continue;  // the template's own planner refused (a VPP split Megatron cannot make)
    }
    // n >= 2 x template_samples and min_cp a power of two: the template is used.
    ASSERT_TRUE(scored.has_value());
    ++planned;
    const DraftPlan built = scored->build(grouped);
    const DraftPlan* plan = &built;
    ASSERT_NO_THROW(check_dynamic_cp_plan(to_plan(built, o.dp, o.cp), ids, lengths, o));
    // The step it reports is the plan's, summed in the same order.
    EXPECT_EQ(scored->step(), modeled_step(*plan, LengthById(ids, lengths), o.cost));
    const size_t stride = n / static_cast<size_t>(template_samples);
    const size_t k = tmpl.microbatches.size();
    ASSERT_EQ(plan->microbatches.size(), k * stride);
    // The samples past the last full block (the shortest n - blocks·stride; group_by_length is
    // checked against a sort in length_order_test.cpp).
    const size_t blocks = n / stride;
    const std::vector<int64_t> by_length = group_by_length(ids, lengths).ids;
    const std::set<int64_t> leftovers(
        by_length.begin() + static_cast<std::ptrdiff_t>(blocks * stride), by_length.end());
    for (size_t copy = 0; copy < stride; ++copy) {
      for (size_t t = 0; t < k; ++t) {
        const DraftMicrobatch& mb = plan->microbatches[copy * k + t];
        ASSERT_EQ(mb.groups.size(), tmpl.microbatches[t].groups.size());
        bool holds_leftover = false;
        for (const CpGroup& g : mb.groups) {
          for (const int64_t id : g.ids) holds_leftover = holds_leftover || leftovers.count(id);
        }
        if (holds_leftover) continue;
        EXPECT_LE(height(mb, length_of_id, o.cost),
                  height(tmpl.microbatches[t], template_lengths, o.cost));
      }
    }
  }
  EXPECT_GE(planned, 30);
}

TEST(PlanByTemplate, DeclinesWhatItCannotCarryAndGivesSamplesNoGroupHasRoomForTheirOwn) {
  ScheduleOptions o;
  o.cost = CostModel::megatron_workload();
  o.dp = 4;
  o.max_seqlen_per_dp_cp_rank = 64;
  auto planner = [](std::span<const int64_t> ids, std::span<const int64_t> lengths,
                    const ScheduleOptions& options) {
    return to_draft(schedule_default_dynamic_cp(ids, lengths, options));
  };
  // Under twice the template.
  std::vector<int64_t> lengths(199, 32);
  std::vector<int64_t> ids(lengths.size());
  std::iota(ids.begin(), ids.end(), int64_t{0});
  EXPECT_FALSE(plan_by_template(group_by_length(ids, lengths), o, 100, planner));
  // min_cp not a power of two: a shorter sample may not use a longer one's group size.
  lengths.assign(400, 32);
  ids.resize(400);
  std::iota(ids.begin(), ids.end(), int64_t{0});
  ScheduleOptions three = o;
  three.dp = 6;
  three.min_cp = 3;
  EXPECT_FALSE(plan_by_template(group_by_length(ids, lengths), three, 100, planner));
  EXPECT_TRUE(plan_by_template(group_by_length(ids, lengths), o, 100, planner));
  // Every sample fills a rank (a batch at a fixed sequence length): the one past the last block
  // finds no group with room and gets a micro-batch of its own after the copies.
  lengths.assign(401, 64);
  ids.resize(401);
  std::iota(ids.begin(), ids.end(), int64_t{0});
  const LengthGroups grouped = group_by_length(ids, lengths);
  const auto scored = plan_by_template(grouped, o, 100, planner);
  ASSERT_TRUE(scored);
  const DraftPlan built = scored->build(grouped);
  EXPECT_NO_THROW(check_dynamic_cp_plan(to_plan(built, o.dp, o.cp), ids, lengths, o));
  EXPECT_EQ(built.num_microbatches(), 100 + 1);  // 4 copies of 25, and 1
  EXPECT_EQ(scored->step(), modeled_step(built, LengthById(ids, lengths), o.cost));
  // ... and so does balanced_dynamic_cp with a VPP group: the extra micro-batches are a multiple.
  ScheduleOptions vpp = o;
  vpp.microbatch_multiple = 2;
  lengths.assign(4 * 2048 + 3, 64);
  ids.resize(lengths.size());
  std::iota(ids.begin(), ids.end(), int64_t{0});
  const Plan plan = schedule_balanced_dynamic_cp(ids, lengths, vpp);
  EXPECT_NO_THROW(check_dynamic_cp_plan(plan, ids, lengths, vpp));
}

TEST(PlanByTemplate, LeftoversTooFewForAVppMultipleArePlannedWithTheLastCopy) {
  // Every sample fills a rank, so the one past the last block finds no room; alone it cannot
  // make a multiple of 2 micro-batches (balanced_dynamic_cp refuses such a batch). Planning it
  // with the last copy's 96 samples replaces that copy (this threw, and balanced_dynamic_cp
  // then planned the whole batch without the template: 858 ms for a million such samples).
  ScheduleOptions o;
  o.cost = CostModel::megatron_workload();
  o.dp = 4;
  o.max_seqlen_per_dp_cp_rank = 64;
  o.microbatch_multiple = 2;
  std::vector<int64_t> lengths(4 * 96 + 1, 64);  // 96 blocks of 4 (24 full micro-batches), 1 more
  std::vector<int64_t> ids(lengths.size());
  std::iota(ids.begin(), ids.end(), int64_t{0});
  std::vector<size_t> planned_sizes;
  auto planner = [&](std::span<const int64_t> p_ids, std::span<const int64_t> p_lengths,
                     const ScheduleOptions& p_o) {
    planned_sizes.push_back(p_ids.size());
    return to_draft(schedule_balanced_dynamic_cp(p_ids, p_lengths, p_o));
  };
  const LengthGroups grouped = group_by_length(ids, lengths);
  const auto scored = plan_by_template(grouped, o, 96, planner);
  ASSERT_TRUE(scored);
  // The template, the leftover alone (refused), then the leftover with the last copy.
  EXPECT_EQ(planned_sizes, (std::vector<size_t>{96, 1, 97}));
  const DraftPlan built = scored->build(grouped);
  EXPECT_NO_THROW(check_dynamic_cp_plan(to_plan(built, o.dp, o.cp), ids, lengths, o));
  EXPECT_EQ(built.num_microbatches() % 2, 0U);
  EXPECT_EQ(scored->step(), modeled_step(built, LengthById(ids, lengths), o.cost));
}

}  // namespace
}  // namespace thdpack::detail
