// Position ids of padding rows in the pipeline's micro-batches, both policies, against the
// single-process reference (which packs whole samples with the same options).

#include <gtest/gtest.h>

#include <atomic>

#include "pipeline_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/pipeline/step_verification.hpp"

namespace thdpack {
namespace {

TEST(PipelinePadPositions, BothPoliciesMatchTheReference) {
  for (const PadPositions policy : {PadPositions::kContinue, PadPositions::kZero}) {
    testing::PipelineCase c;
    c.cp = 2;  // divisor 4: most samples get padding rows (in CP rank 0's last chunk)
    c.dp = 2;
    std::atomic<int64_t> pads{0}, zero_pads{0};
    run_local(c.world_size(), [&](Communicator& world) {
      PipelineOptions o = testing::options_of(c);
      o.pad_positions = policy;
      Pipeline p(world, o);
      const auto local = testing::local_samples(o, world.rank(), 1, 16);
      const StepResult r = p.run_step(local);
      for (const PackedBatch& m : *r.microbatches) {
        for (size_t i = 0; i < m.padding_mask.size(); ++i) {
          if (!m.padding_mask[i]) continue;
          ++pads;
          if (m.position_ids[i] == 0) ++zero_pads;
        }
      }
      verify_step(world, o, r, local, [](int64_t id) { return testing::case_sample(id, 1); });
    });
    EXPECT_GT(pads.load(), 0);
    EXPECT_EQ(zero_pads.load() == pads.load(), policy == PadPositions::kZero);
  }
}

}  // namespace
}  // namespace thdpack
