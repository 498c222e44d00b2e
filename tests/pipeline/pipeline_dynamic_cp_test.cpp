// Dynamic-CP delivery through the pipeline on the local-thread communicator: many batches whose
// every rank's micro-batches equal the single-process reference (verify_step, which uses
// rank_microbatches), CP groups in the step result that match the plan and members of
// a group that agree, and the options dynamic CP does not support refused on every rank.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>

#include "every_rank_failure.hpp"
#include "pipeline_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/step_verification.hpp"

namespace thdpack {
namespace {

using testing::PipelineCase;

// The dynamic-CP layouts of testing::dynamic_cp_matrix run with the fixed-CP ones in
// pipeline_local_test.cpp (PipelineLocal, DynamicCp/...).

// Many batches (seeds) on two layouts; each step is verified against the reference.
TEST(PipelineDynamicCpSeeds, ManyBatchesMatchTheReference) {
  for (const char* scheduler : {"default_dynamic_cp", "balanced_dynamic_cp"}) {
    for (const auto& [cp, dp] : {std::pair{2, 2}, std::pair{4, 1}}) {
      PipelineCase c;
      c.cp = cp;
      c.dp = dp;
      c.scheduler = scheduler;
      c.max_seqlen_per_dp_cp_rank = 96;  // samples over 4·96 are truncated
      c.oversize = OversizePolicy::kTruncate;
      c.samples_per_replica = 12 / dp;
      c.first_step = 100;
      c.steps = 40;
      SCOPED_TRACE(c.name());
      run_local(c.world_size(), [&](Communicator& world) { testing::run_case(world, c); });
    }
  }
}

// The step result names each micro-batch's group as the plan does, every member of a group holds
// the same metadata, and the groups use more than one size across the run (so CP really varies).
TEST(PipelineDynamicCpGroups, StepResultNamesThePlansGroups) {
  PipelineCase c;
  c.tp = 2;
  c.cp = 2;
  c.dp = 2;
  c.scheduler = "default_dynamic_cp";
  c.max_seqlen_per_dp_cp_rank = 128;
  std::mutex mutex;
  std::map<std::pair<int64_t, int>, std::vector<int32_t>> cu_by_group;  // (k, first) -> cu
  std::map<int, int> sizes;
  std::atomic<int> mismatches{0};
  run_local(c.world_size(), [&](Communicator& world) {
    const PipelineOptions o = testing::options_of(c);
    Pipeline p(world, o);
    const auto local = testing::local_samples(o, world.rank(), 3, 16);
    const StepResult r = p.run_step(local);
    ASSERT_TRUE(r.dynamic_cp);
    ASSERT_EQ(r.plan.ranks(), o.topology.dp() * o.topology.cp());
    ASSERT_EQ(r.cp_groups.size(), static_cast<size_t>(r.num_microbatches()));
    ASSERT_EQ(r.microbatches->size(), r.cp_groups.size());
    const Coordinates me = o.topology.coordinates(world.rank());
    const int g = me.dp * o.topology.cp() + me.cp;
    for (size_t k = 0; k < r.cp_groups.size(); ++k) {
      const MicrobatchCpGroup& mine = r.cp_groups[k];
      const CpGroupView planned = r.plan.microbatch(static_cast<int64_t>(k)).group_of(g);
      const PackedBatch& m = (*r.microbatches)[k];
      EXPECT_EQ(mine.local_cp_size, planned.size);
      EXPECT_EQ(mine.first_dp_cp_index, planned.first_rank);
      EXPECT_EQ(mine.cp_rank, g - planned.first_rank);
      EXPECT_EQ(m.cp_size, planned.size);
      EXPECT_EQ(m.cp_rank, mine.cp_rank);
      EXPECT_EQ(m.sample_ids, std::vector<int64_t>(planned.ids.begin(), planned.ids.end()));
      ASSERT_EQ(mine.member_ranks.size(), static_cast<size_t>(planned.size));
      EXPECT_EQ(mine.member_ranks[static_cast<size_t>(mine.cp_rank)], world.rank());
      for (int member : mine.member_ranks) {
        const Coordinates mc = o.topology.coordinates(member);
        EXPECT_EQ(mc.tp, me.tp);
        EXPECT_EQ(mc.pp, me.pp);
      }
      const std::lock_guard lock(mutex);
      ++sizes[mine.local_cp_size];
      const auto [it, fresh] = cu_by_group.emplace(
          std::pair{static_cast<int64_t>(k), mine.first_dp_cp_index}, m.cu_seqlens_padded);
      if (!fresh && it->second != m.cu_seqlens_padded) ++mismatches;
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GE(sizes.size(), 2u) << "the batch should use CP groups of more than one size";
}

// Samples are padded to 2·dp·cp (× tp with sequence parallelism), SPEC §5.
TEST(PipelineScheduleOptions, PaddingDivisorIsTwiceDpCp) {
  PipelineCase c;
  c.tp = 2;
  c.cp = 2;
  c.dp = 4;
  c.scheduler = "balanced_dynamic_cp";
  EXPECT_EQ(pack_options_of(testing::options_of(c)).divisor, 16);
  c.sequence_parallel = true;
  EXPECT_EQ(pack_options_of(testing::options_of(c)).divisor, 32);
  EXPECT_EQ(pack_options_of(testing::options_of(c)).capacity, 512 * 8);
  EXPECT_TRUE(uses_dynamic_cp(testing::options_of(c)));
  c.scheduler = "balanced";
  EXPECT_FALSE(uses_dynamic_cp(testing::options_of(c)));
}

// Runs `body` on `ranks` threads; every rank must throw InvalidArgument mentioning `needle`.
void expect_error_on_every_rank(int ranks, const std::function<void(Communicator&)>& body,
                                const std::string& needle) {
  test_util::expect_invalid_argument_on_every_rank(ranks, needle, body);
}

PipelineOptions dynamic_options(const char* scheduler) {
  PipelineCase c;
  c.cp = 2;
  c.dp = 2;
  c.scheduler = scheduler;
  c.max_seqlen_per_dp_cp_rank = 128;
  return testing::options_of(c);
}

TEST(PipelineScheduleOptions, UnsupportedOptionsAreRefusedOnEveryRank) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    PipelineOptions o = dynamic_options("default_dynamic_cp");
    if (variant == 0) o.cp_mode = CpMode::kContiguous;
    if (variant == 1) {
      o.tail_align = TailAlign::kMultiple;
      o.tail_multiple = 64;
    }
    if (variant == 2) o.fixed_cu_seqlens_entries = 8;
    if (variant == 3) o.max_sequences_per_pack = 4;
    expect_error_on_every_rank(
        4, [&](Communicator& world) { Pipeline p(world, o); }, "does not support");
  }
}

TEST(PipelineScheduleOptions, GroupIdsAreRefusedOnEveryRank) {
  const PipelineOptions o = dynamic_options("balanced_dynamic_cp");
  expect_error_on_every_rank(
      4,
      [&](Communicator& world) {
        Pipeline p(world, o);
        const auto local = testing::local_samples(o, world.rank(), 0, 16);
        const std::vector<int64_t> groups(local.size(), 0);
        p.run_step(local, groups);
      },
      "group ids");
}

// dp·cp = 6 and 12 are not powers of two: samples are padded to 2·lcm of the group sizes (24 for
// groups of 1, 2, 4, 6; 48 with min_cp 3 for 1, 2, 3, 4, 6, 8, 12), so groups of 4 and 6 slice
// them, and every rank's micro-batches equal the reference, in both dynamic-CP schedulers.
TEST(PipelineDynamicCpLayouts, NonPowerOfTwoLayoutsArePaddedNotRefused) {
  for (const char* scheduler : {"default_dynamic_cp", "balanced_dynamic_cp"}) {
    for (const auto& [cp, dp] : {std::pair{2, 3}, std::pair{3, 2}, std::pair{1, 6}}) {
      PipelineCase c;
      c.cp = cp;
      c.dp = dp;
      c.scheduler = scheduler;
      c.max_seqlen_per_dp_cp_rank = 128;
      c.oversize = OversizePolicy::kTruncate;
      c.steps = 4;
      SCOPED_TRACE(c.name());
      std::atomic<int> widest{0};
      run_local(c.world_size(), [&](Communicator& world) {
        const PipelineOptions o = testing::options_of(c);
        EXPECT_EQ(pack_options_of(o).divisor, 24);
        Pipeline p(world, o);
        for (int64_t step = 0; step < c.steps; ++step) {
          const auto local = testing::local_samples(o, world.rank(), step, 6 * 8);
          const StepResult r = p.run_step(local);
          verify_step(world, o, r, local,
                      [step](int64_t id) { return testing::case_sample(id, step); });
          for (const MicrobatchCpGroup& g : r.cp_groups) {
            int seen = widest.load();
            while (g.local_cp_size > seen && !widest.compare_exchange_weak(seen, g.local_cp_size)) {
            }
          }
        }
      });
      EXPECT_GE(widest.load(), 4) << "no group of 4 or 6 ranks: the case did not test the padding";
    }
  }
}

}  // namespace
}  // namespace thdpack
