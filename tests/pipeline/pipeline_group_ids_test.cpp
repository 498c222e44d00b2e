// Group ids through the pipeline: samples of a group (held by different DP ranks) end in one
// micro-batch, the step still matches the single-process reference, and bad group ids fail on
// every rank.

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>

#include "every_rank_failure.hpp"
#include "pipeline_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/step_verification.hpp"

namespace thdpack {
namespace {

using testing::PipelineCase;

constexpr int64_t kGlobalBatch = 32;

// Pairs across DP ranks: sample id i and i + 16 (ids of a step are the dataset indices).
std::vector<int64_t> pair_ids(const std::vector<Sample>& local) {
  std::vector<int64_t> out;
  for (const Sample& s : local) out.push_back(s.id % (kGlobalBatch / 2));
  return out;
}

PipelineCase grouped_case(int tp, int dp, ReadingMode reading) {
  PipelineCase c;
  c.tp = tp;
  c.cp = 2;  // C = 1024 holds any pair of the case dataset's samples (<= 500 tokens each)
  c.dp = dp;
  c.reading = reading;
  return c;
}

TEST(PipelineGroupIds, PairsShareAMicroBatchAndMatchTheReference) {
  for (const PipelineCase& c :
       {grouped_case(1, 2, ReadingMode::kMegatron), grouped_case(2, 2, ReadingMode::kAllRanks),
        grouped_case(1, 4, ReadingMode::kMegatron)}) {
    for (int64_t step = 0; step < 3; ++step) {
      run_local(c.world_size(), [&](Communicator& world) {
        const PipelineOptions o = testing::options_of(c);
        Pipeline p(world, o);
        const auto local = testing::local_samples(o, world.rank(), step, kGlobalBatch);
        const StepResult r = p.run_step(local, pair_ids(local));
        ASSERT_EQ(r.batch.group_ids.size(), r.batch.ids.size());
        std::map<int64_t, std::set<int64_t>> packs_of_pair;
        for (int64_t pack = 0; pack < r.plan.num_packs(); ++pack) {
          for (int64_t id : r.plan.pack_at(pack))
            packs_of_pair[id % (kGlobalBatch / 2)].insert(pack);
        }
        EXPECT_EQ(packs_of_pair.size(), static_cast<size_t>(kGlobalBatch / 2));
        for (const auto& [pair, packs] : packs_of_pair) EXPECT_EQ(packs.size(), 1u) << pair;
        verify_step(world, o, r, local,
                    [step](int64_t id) { return testing::case_sample(id, step); });
      });
    }
  }
}

TEST(PipelineGroupIds, WithoutGroupIdsTheBatchHasNone) {
  const PipelineCase c = grouped_case(1, 2, ReadingMode::kMegatron);
  run_local(c.world_size(), [&](Communicator& world) {
    const PipelineOptions o = testing::options_of(c);
    Pipeline p(world, o);
    const StepResult r = p.run_step(testing::local_samples(o, world.rank(), 0, kGlobalBatch));
    EXPECT_TRUE(r.batch.group_ids.empty());
  });
}

void expect_error_everywhere(const PipelineCase& c, bool wrong_count, const std::string& needle) {
  test_util::expect_invalid_argument_on_every_rank(
      c.world_size(), needle, [&](Communicator& world) {
        const PipelineOptions o = testing::options_of(c);
        Pipeline p(world, o);
        const auto local = testing::local_samples(o, world.rank(), 0, kGlobalBatch);
        auto groups = pair_ids(local);
        // Only DP rank 1's readers get it wrong; every rank must still fail.
        if (o.topology.coordinates(world.rank()).dp == 1 && !groups.empty()) {
          if (wrong_count) {
            groups.pop_back();
          } else {
            groups[0] = -7;
          }
        }
        p.run_step(local, groups);
      });
}

TEST(PipelineGroupIds, ReadersThatDifferOnlyInGroupIdsAreToldSo) {
  const PipelineCase c = grouped_case(2, 2, ReadingMode::kAllRanks);  // TP peers read too
  test_util::expect_invalid_argument_on_every_rank(
      c.world_size(), "group ids differ", [&](Communicator& world) {
        const PipelineOptions o = testing::options_of(c);
        Pipeline p(world, o);
        const auto local = testing::local_samples(o, world.rank(), 0, kGlobalBatch);
        auto groups = pair_ids(local);
        if (o.topology.coordinates(world.rank()).tp == 1) groups[0] = 1000;
        p.run_step(local, groups);
      });
}

TEST(PipelineGroupIds, BadGroupIdsFailOnEveryRank) {
  const PipelineCase c = grouped_case(1, 2, ReadingMode::kMegatron);
  expect_error_everywhere(c, true, "group ids for");
  expect_error_everywhere(c, false, "group ids must be >= 0");
}

}  // namespace
}  // namespace thdpack
