// Static shapes (tail alignment, fixed cu_seqlens entries) and the sequence cap through the
// distributed pipeline: every rank's micro-batches equal the single-process reference, which packs
// with pack_samples and the same options, and every pack has the static shape asked for.

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "expect_throw.hpp"
#include "pipeline_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/step_verification.hpp"

namespace thdpack {
namespace {

using testing::PipelineCase;

std::vector<PipelineCase> static_cases() {
  std::vector<PipelineCase> out;
  // (tp, pp, cp, dp): data parallel, CP slicing of the tail, intermediate stages, TP broadcast.
  const int layouts[][4] = {{1, 1, 1, 4}, {1, 1, 2, 2}, {2, 2, 1, 2}, {1, 2, 2, 2}};
  for (const auto& l : layouts) {
    for (TailAlign align : {TailAlign::kMultiple, TailAlign::kCapacity}) {
      for (TailPolicy policy : {TailPolicy::kAppendDummySeq, TailPolicy::kExtendLast}) {
        for (const char* scheduler : {"balanced", "dp_balanced"}) {
          PipelineCase c;
          c.tp = l[0];
          c.pp = l[1];
          c.cp = l[2];
          c.dp = l[3];
          c.scheduler = scheduler;
          c.tail_align = align;
          c.tail_multiple = align == TailAlign::kMultiple ? 128 : 0;
          c.tail_policy = policy;
          c.fixed_cu_seqlens_entries = policy == TailPolicy::kExtendLast ? 12 : 0;
          c.max_sequences_per_pack = scheduler[0] == 'd' ? 3 : 0;
          c.tokens_on_last_stage = l[1] > 1 && policy == TailPolicy::kExtendLast;
          c.steps = 2;
          out.push_back(c);
        }
      }
    }
  }
  return out;
}

class StaticShapePipeline : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(StaticShapePipeline, EveryRankMatchesTheReferenceAndHasTheStaticShape) {
  const PipelineCase c = GetParam();
  const PipelineOptions options = testing::options_of(c);
  const int64_t capacity = options.max_seqlen_per_dp_cp_rank * c.cp;
  std::mutex mutex;
  int64_t packs_seen = 0;
  run_local(c.world_size(), [&](Communicator& world) {
    Pipeline pipeline(world, options);
    const int64_t global_batch = c.samples_per_replica * c.dp;
    for (int64_t step = 0; step < c.steps; ++step) {
      const auto local = testing::local_samples(options, world.rank(), step, global_batch);
      const StepResult result = pipeline.run_step(local);
      verify_step(world, options, result, local,
                  [step](int64_t id) { return testing::case_sample(id, step); });
      std::lock_guard<std::mutex> lock(mutex);
      for (const PackedBatch& m : *result.microbatches) {
        const int64_t rows = m.cu_seqlens_padded.back();
        if (c.tail_align == TailAlign::kCapacity) {
          EXPECT_EQ(rows, capacity);
        } else {
          EXPECT_EQ(rows % c.tail_multiple, 0);
        }
        EXPECT_EQ(m.num_rows() * c.cp, rows);
        if (c.fixed_cu_seqlens_entries > 0) {
          EXPECT_EQ(static_cast<int64_t>(m.cu_seqlens.size()), c.fixed_cu_seqlens_entries);
        }
        if (c.tokens_on_last_stage && pipeline.coordinates().pp == c.pp - 1) {
          EXPECT_EQ(static_cast<int64_t>(m.tokens.size()), m.num_rows());  // MTP needs tokens
        }
        if (c.max_sequences_per_pack > 0) {
          EXPECT_LE(static_cast<int64_t>(m.sample_ids.size()), c.max_sequences_per_pack);
        }
        ++packs_seen;
      }
    }
  });
  EXPECT_GT(packs_seen, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, StaticShapePipeline, ::testing::ValuesIn(static_cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(StaticShapePipelineErrors, TailMultipleNotOfTheDivisorFailsOnEveryRank) {
  PipelineCase c;
  c.cp = 2;
  c.dp = 2;
  c.tail_align = TailAlign::kMultiple;
  c.tail_multiple = 6;  // the divisor is 4 at cp 2
  const PipelineOptions options = testing::options_of(c);
  std::atomic<int> errors{0};
  EXPECT_THROW(
      run_local(c.world_size(),
                [&](Communicator& world) {
                  Pipeline pipeline(world, options);
                  try {
                    pipeline.run_step(testing::local_samples(options, world.rank(), 0, 16));
                  } catch (const InvalidArgument& e) {
                    EXPECT_NE(std::string(e.what()).find("tail_multiple (6)"), std::string::npos);
                    ++errors;
                    throw;
                  }
                }),
      InvalidArgument);
  EXPECT_EQ(errors.load(), c.world_size());
}

TEST(StaticShapePipelineErrors, FixedEntriesLeavingNoRoomAreRefused) {
  PipelineCase c;
  c.tail_align = TailAlign::kCapacity;
  c.fixed_cu_seqlens_entries = 2;  // one sequence, but a dummy one may be appended
  test_util::expect_throw_with<InvalidArgument>(
      [&] { schedule_options_of(testing::options_of(c)); }, "leaves no room");
  c.tail_policy = TailPolicy::kExtendLast;  // no dummy: one sequence per pack
  EXPECT_EQ(schedule_options_of(testing::options_of(c)).max_sequences_per_pack, 1);
}

}  // namespace
}  // namespace thdpack
