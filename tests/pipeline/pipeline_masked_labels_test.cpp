// ignore_masked_labels through the pipeline: with CP slicing and the DP exchange, every rank's
// micro-batches equal the single-process reference (which packs whole samples with the same
// option), and every position without loss weight carries the ignore label, so a loss with
// ignore_index alone skips the masked prompt.

#include <gtest/gtest.h>

#include <atomic>

#include "pipeline_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/pipeline/step_verification.hpp"

namespace thdpack {
namespace {

TEST(PipelineMaskedLabels, MaskedPositionsCarryTheIgnoreLabelOnEveryRank) {
  testing::PipelineCase c;
  c.cp = 2;
  c.dp = 2;
  static constexpr int64_t step = 1;  // odd steps keep the case samples' loss masks
  std::atomic<int64_t> masked_real{0}, mismatched{0};
  run_local(c.world_size(), [&](Communicator& world) {
    PipelineOptions o = testing::options_of(c);
    o.ignore_masked_labels = true;
    o.ignore_id = -7;  // not the default, so the option is seen to use the configured label
    Pipeline p(world, o);
    const auto local = testing::local_samples(o, world.rank(), step, 16);
    const StepResult r = p.run_step(local);
    for (const PackedBatch& m : *r.microbatches) {
      for (size_t i = 0; i < m.loss_mask.size(); ++i) {
        const bool no_weight = m.loss_mask[i] == 0.0f;
        if (no_weight && !m.padding_mask[i]) ++masked_real;
        if (no_weight != (m.labels[i] == o.ignore_id)) ++mismatched;
      }
    }
    verify_step(world, o, r, local, [](int64_t id) { return testing::case_sample(id, step); });
  });
  EXPECT_GT(masked_real.load(), 0) << "the case's samples must have masked positions";
  EXPECT_EQ(mismatched.load(), 0);
}

}  // namespace
}  // namespace thdpack
