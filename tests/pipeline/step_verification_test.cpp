// verify_step, the check `thdpack run` makes of every step, finds what is wrong: a token changed in
// one rank's micro-batch, a reference that disagrees, and tokens a reader started with that no
// micro-batch holds. Every rank raises, naming the fault; an untouched step passes.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "expect_throw.hpp"
#include "pipeline_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/step_verification.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;

constexpr int64_t kStep = 1;

Sample reference_sample(int64_t id) {
  return testing::case_sample(id, kStep);
}

using Spoil =
    std::function<void(StepResult&, std::vector<Sample>&, std::function<Sample(int64_t)>&)>;

// Runs one step of the 2×2 (dp × cp) case on every rank, lets `spoil` change what rank `spoiled`
// hands to verify_step, and checks that every rank raises with all of `needles` (none: passes).
void check_verification(int spoiled, const Spoil& spoil,
                        std::initializer_list<std::string> needles) {
  testing::PipelineCase c;
  c.dp = 2;
  c.cp = 2;
  run_local(c.world_size(), [&](Communicator& world) {
    const PipelineOptions o = testing::options_of(c);
    Pipeline pipeline(world, o);
    std::vector<Sample> local = testing::local_samples(o, world.rank(), kStep, 16);
    StepResult r = pipeline.run_step(local);
    std::function<Sample(int64_t)> sample_of = reference_sample;
    if (world.rank() == spoiled) spoil(r, local, sample_of);
    if (needles.size() == 0) {
      EXPECT_NO_THROW(verify_step(world, o, r, local, sample_of));
    } else {
      expect_throw_with<InternalError>([&] { verify_step(world, o, r, local, sample_of); },
                                       needles);
    }
  });
}

// The first non-padding row of the first micro-batch, changed.
void change_a_token(StepResult& r) {
  auto copy = std::make_shared<std::vector<PackedBatch>>(*r.microbatches);
  PackedBatch& m = copy->front();
  for (size_t j = 0; j < m.tokens.size(); ++j) {
    if (!m.padding_mask[j]) {
      m.tokens[j] += 1;
      break;
    }
  }
  r.microbatches = copy;
}

TEST(StepVerification, AnUntouchedStepPasses) {
  check_verification(1, [](StepResult&, std::vector<Sample>&, std::function<Sample(int64_t)>&) {},
                     {});
}

TEST(StepVerification, ATokenChangedOnOneRankFailsEveryRank) {
  check_verification(1,
                     [](StepResult& r, std::vector<Sample>&, std::function<Sample(int64_t)>&) {
                       change_a_token(r);
                     },
                     {"step verification failed",
                      "differs from the single-process reference: rank 1: "
                      "micro-batch 0"});
}

TEST(StepVerification, AReferenceThatDisagreesFailsEveryRank) {
  check_verification(
      1,
      [](StepResult&, std::vector<Sample>&, std::function<Sample(int64_t)>& sample_of) {
        sample_of = [](int64_t id) {  // every token: each CP rank holds some of every sample
          Sample s = reference_sample(id);
          for (int64_t& t : s.input_ids) t += 1;
          return s;
        };
      },
      {"differs from the single-process reference: rank 1"});
}

TEST(StepVerification, TokensAReaderStartedWithThatNoMicrobatchHoldsFailEveryRank) {
  // Rank 0 is DP index 0's source: what it read is what the step started with.
  check_verification(0,
                     [](StepResult&, std::vector<Sample>& local, std::function<Sample(int64_t)>&) {
                       ASSERT_FALSE(local.empty());
                       local.front().input_ids.front() += 1;
                     },
                     {"tokens not conserved"});
}

}  // namespace
}  // namespace thdpack
