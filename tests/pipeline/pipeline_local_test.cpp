// The pipeline on the local-thread communicator: every layout of the test matrix, both reading
// modes, with and without VPP, every scheduler, checked against the single-process reference on
// every rank (verify_step), plus the failures that must reach every rank.

#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "every_rank_failure.hpp"
#include "expect_throw.hpp"
#include "pipeline_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/comm/process_groups.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/step_verification.hpp"

namespace thdpack {
namespace {

using testing::PipelineCase;

class PipelineLocal : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(PipelineLocal, EveryRankMatchesTheReference) {
  const PipelineCase c = GetParam();
  std::atomic<int64_t> microbatches{-1};
  std::atomic<bool> counts_differ{false};
  run_local(c.world_size(), [&](Communicator& world) {
    const testing::CaseOutcome outcome = testing::run_case(world, c);
    EXPECT_EQ(outcome.steps, c.steps);
    EXPECT_LE(outcome.collectives_max, 4) << "collectives per step must not depend on fields";
    int64_t expected = -1;
    if (!microbatches.compare_exchange_strong(expected, outcome.microbatches) &&
        expected != outcome.microbatches) {
      counts_differ = true;
    }
  });
  EXPECT_FALSE(counts_differ.load());
  EXPECT_GT(microbatches.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Matrix, PipelineLocal, ::testing::ValuesIn(testing::full_matrix()),
                         [](const auto& info) { return info.param.name(); });
INSTANTIATE_TEST_SUITE_P(DynamicCp, PipelineLocal,
                         ::testing::ValuesIn(testing::dynamic_cp_matrix()),
                         [](const auto& info) { return info.param.name(); });

TEST(PipelineLocalErrors, InconsistentOptionsFailOnEveryRank) {
  std::atomic<int> errors{0};
  EXPECT_THROW(
      run_local(
          4,
          [&](Communicator& world) {
            PipelineCase c;
            c.dp = 4;
            PipelineOptions o = testing::options_of(c);
            if (world.rank() == 3) o.max_seqlen_per_dp_cp_rank = 256;
            try {
              Pipeline p(world, o);
            } catch (const InvalidArgument& e) {
              const std::string what = e.what();
              EXPECT_NE(what.find("ranks disagree on max_seqlen_per_dp_cp_rank"), std::string::npos)
                  << what;
              EXPECT_NE(what.find("rank 3 has '256'"), std::string::npos) << what;
              ++errors;
              throw;
            }
          }),
      InvalidArgument);
  EXPECT_EQ(errors.load(), 4);
}

TEST(PipelineLocalErrors, WorldSizeMismatch) {
  test_util::expect_throw_with<InvalidArgument>(
      [] {
        run_local(3, [](Communicator& world) {
          PipelineCase c;
          c.dp = 4;
          Pipeline p(world, testing::options_of(c));
        });
      },
      "world size 3");
}

// A step-level failure (decided from gathered data) must reach every rank.
void expect_step_error_everywhere(
    const PipelineCase& c,
    const std::function<std::vector<Sample>(const PipelineOptions&, int)>& samples,
    const std::string& needle) {
  test_util::expect_invalid_argument_on_every_rank(
      c.world_size(), needle, [&](Communicator& world) {
        const PipelineOptions o = testing::options_of(c);
        Pipeline p(world, o);
        p.run_step(samples(o, world.rank()));
      });
}

TEST(PipelineLocalErrors, ReadersOfOneDpIndexMustAgree) {
  PipelineCase c;
  c.tp = 1;
  c.cp = 2;
  c.dp = 2;
  expect_step_error_everywhere(
      c,
      [](const PipelineOptions& o, int rank) {
        auto s = testing::local_samples(o, rank, 0, 16);
        if (o.topology.coordinates(rank).cp == 1 && !s.empty()) s.pop_back();
        return s;
      },
      "must hold the same samples");
}

TEST(PipelineLocalErrors, NonReadersMustNotBeGivenSamples) {
  PipelineCase c;
  c.tp = 2;
  c.dp = 2;
  expect_step_error_everywhere(
      c,
      [](const PipelineOptions& o, int rank) {
        // Every rank reads, although in Megatron mode TP rank 1 must not.
        PipelineOptions all = o;
        all.reading = ReadingMode::kAllRanks;
        return testing::local_samples(all, rank, 0, 16);
      },
      "does not read data");
}

// The oversize error states the cap that applies: M·cp (1024) under fixed CP, M·dp·cp (2048) under
// dynamic CP, where a sample may span the whole dp·cp group.
TEST(PipelineLocalErrors, OversizedSampleUnderErrorPolicyNamesTheCapThatApplies) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"balanced", "max_seqlen_per_dp_cp_rank x cp is 1024"},
      {"default_dynamic_cp", "max_seqlen_per_dp_cp_rank x dp x cp is 2048"},
      {"balanced_dynamic_cp", "max_seqlen_per_dp_cp_rank x dp x cp is 2048"}};
  for (const auto& [scheduler, needle] : cases) {
    PipelineCase c;
    c.dp = 2;
    c.cp = 2;
    c.scheduler = scheduler;
    SCOPED_TRACE(scheduler);
    expect_step_error_everywhere(
        c,
        [](const PipelineOptions& o, int rank) {
          auto s = testing::local_samples(o, rank, 0, 16);
          if (!s.empty()) {
            s[0].input_ids.resize(3000, 5);  // M = 512
            if (!s[0].loss_mask.empty()) s[0].loss_mask.resize(3000, 1.0f);
            if (!s[0].labels.empty()) s[0].labels.resize(3000, 5);
          }
          return s;
        },
        needle);
  }
}

// A sample packing would refuse on one reader stops every rank at the gather (no rank is left
// waiting in the sample exchange): the reader names the sample, the peers name the reader. Also
// after good steps, when the gather moves headers and lists in one collective (GatherSizing), and
// through fail_step (a rank that could not even build its samples). Every rank then goes on with
// the next step, which must match the reference (the ranks still agree on the gather's shape).
TEST(PipelineLocalErrors, BadLossMaskLengthOnOneReaderFailsOnEveryRank) {
  for (const int good_steps : {0, 2}) {
    for (const bool through_fail_step : {false, true}) {
      SCOPED_TRACE("after " + std::to_string(good_steps) + " good steps" +
                   (through_fail_step ? ", through fail_step" : ""));
      PipelineCase c;
      c.dp = 4;
      std::atomic<int> own{0};
      std::atomic<int> peers{0};
      run_local(
          c.world_size(),
          [&](Communicator& world) {
            const PipelineOptions o = testing::options_of(c);
            Pipeline p(world, o);
            for (int step = 0; step < good_steps; ++step) {
              p.run_step(testing::local_samples(o, world.rank(), step, 16));
            }
            auto s = testing::local_samples(o, world.rank(), good_steps, 16);
            if (world.rank() == 2 && !s.empty()) {
              s[0].loss_mask.assign(s[0].input_ids.size() + 1, 1.0f);
            }
            try {
              if (world.rank() == 2 && through_fail_step) {
                p.fail_step("loss_mask has the wrong length");
              }
              p.run_step(s);
              ADD_FAILURE() << "rank " << world.rank() << " did not stop";
            } catch (const InvalidArgument& e) {
              const std::string what = e.what();
              if (world.rank() == 2) {
                EXPECT_NE(what.find("loss_mask has"), std::string::npos) << what;
                ++own;
              } else {
                EXPECT_NE(what.find("rank 2 could not prepare its samples"), std::string::npos)
                    << what;
                ++peers;
              }
            }
            // The next step, as large as the failed one: its lists fit the width the peers took
            // from that step, so they gather in one collective, and so must the failing rank.
            const auto next = testing::local_samples(o, world.rank(), good_steps + 1, 16);
            const StepResult result = p.run_step(next);
            verify_step(world, o, result, next,
                        [&](int64_t id) { return testing::case_sample(id, good_steps + 1); });
          },
          LocalOptions{.timeout_seconds = 10.0});
      EXPECT_EQ(own.load(), 1);
      EXPECT_EQ(peers.load(), c.world_size() - 1);
    }
  }
}

// The gather carries its size from step to step: where every rank reads, lists that fit the
// width of the last step go with the headers in one collective. Batches that grow past that width,
// shrink, and differ between ranks match the reference on every rank, and a steady run takes one
// collective fewer per step than the first step.
TEST(PipelineLocal, BatchesThatGrowShrinkAndDifferBetweenRanksMatchTheReference) {
  PipelineCase c;
  c.dp = 4;
  const PipelineOptions o = testing::options_of(c);
  const int64_t global_batches[] = {8, 8, 40, 12, 200, 4, 4, 4};
  run_local(c.world_size(), [&](Communicator& world) {
    Pipeline p(world, o);
    std::vector<int64_t> collectives;
    for (size_t step = 0; step < std::size(global_batches); ++step) {
      auto local =
          testing::local_samples(o, world.rank(), static_cast<int64_t>(step), global_batches[step]);
      // Rank r keeps (r + 1) quarters of its share: lists of four sizes.
      local.resize(std::max<size_t>(1, local.size() * static_cast<size_t>(world.rank() + 1) / 4));
      const StepResult result = p.run_step(local);
      verify_step(world, o, result, local, [step](int64_t id) {
        return testing::case_sample(id, static_cast<int64_t>(step));
      });
      collectives.push_back(result.traffic.collectives);
    }
    EXPECT_EQ(collectives.back(), collectives.front() - 1);
    EXPECT_EQ(collectives[2], collectives.front()) << "a list past the width takes two";
  });
}

TEST(PipelineLocal, TruncationMatchesTheReference) {
  PipelineCase c;
  c.cp = 2;
  c.dp = 2;
  c.oversize = OversizePolicy::kTruncate;
  // Step 0 sends tokens alone, step 1 rows (testing::case_sample).
  for (const int64_t step : {0, 1}) {
    run_local(c.world_size(), [&](Communicator& world) {
      const PipelineOptions o = testing::options_of(c);
      Pipeline p(world, o);
      auto lengthen = [](Sample& s) {
        if (s.id % 3 == 0) s.input_ids.resize(1500, s.input_ids.back());
        if (!s.loss_mask.empty()) s.loss_mask.resize(s.input_ids.size(), 1.0f);
      };
      auto local = testing::local_samples(o, world.rank(), step, 16);
      for (Sample& s : local) lengthen(s);
      const StepResult r = p.run_step(local);
      EXPECT_GT(r.batch.truncated, 0);
      EXPECT_EQ(r.batch.samples_carry_targets, step == 1);
      // The reference sees the same long samples.
      std::map<int64_t, Sample> by_id;
      for (int rank = 0; rank < world.size(); ++rank) {
        for (Sample s : testing::local_samples(o, rank, step, 16)) {
          lengthen(s);
          by_id[s.id] = s;
        }
      }
      verify_step(world, o, r, local, [&](int64_t id) { return by_id.at(id); });
    });
  }
}

// One sample with labels on one DP rank is enough for every rank to exchange rows (its labels
// cannot be derived from its tokens); without it, tokens alone travel. Both match the reference.
TEST(PipelineLocal, OneSampleWithLabelsOnOneRankMakesEveryRankExchangeRows) {
  PipelineCase c;
  c.cp = 2;
  c.dp = 4;
  int64_t exchanged_bytes[2] = {0, 0};  // over all ranks, without and with the labels
  for (const bool with_labels : {false, true}) {
    std::atomic<int64_t> exchanged{0};
    run_local(c.world_size(), [&](Communicator& world) {
      const PipelineOptions o = testing::options_of(c);
      Pipeline p(world, o);
      const int64_t labelled =
          testing::local_samples(o, o.topology.rank_of({.dp = 1}), 2, 64).at(2).id;
      auto sample_of = [&](int64_t id) {
        Sample s = testing::case_sample(id, 0);
        if (with_labels && id == labelled) {
          s.labels = s.input_ids;
          s.labels.front() = -100;
        }
        return s;
      };
      std::vector<Sample> local;
      for (const Sample& s : testing::local_samples(o, world.rank(), 2, 64)) {
        local.push_back(sample_of(s.id));
      }
      const StepResult r = p.run_step(local);
      EXPECT_EQ(r.batch.samples_carry_targets, with_labels);
      exchanged += r.traffic.exchange_bytes;
      verify_step(world, o, r, local, sample_of);
    });
    exchanged_bytes[with_labels ? 1 : 0] = exchanged.load();
  }
  // Rows (20 B each, padding included) move more than tokens alone (8 B per real row).
  EXPECT_GT(exchanged_bytes[0], 0);
  EXPECT_GT(exchanged_bytes[1], 2 * exchanged_bytes[0]);
}

TEST(PipelineLocal, IteratorsExposeOnlyTheirVirtualStageFields) {
  PipelineCase c;
  c.pp = 2;
  c.vpp = 2;
  c.dp = 2;
  run_local(c.world_size(), [&](Communicator& world) {
    const PipelineOptions o = testing::options_of(c);
    Pipeline p(world, o);
    const StepResult r = p.run_step(testing::local_samples(o, world.rank(), 0, 16));
    const auto its = r.iterators();
    ASSERT_EQ(its.size(), 2u);
    const int pp_rank = p.coordinates().pp;
    for (int v = 0; v < 2; ++v) {
      MicroBatchIterator it = its[static_cast<size_t>(v)];
      EXPECT_EQ(it.size(), static_cast<size_t>(r.num_microbatches()));
      const PackedBatchView first = it.next();
      EXPECT_EQ(!first.tokens.empty(), pp_rank == 0 && v == 0);
      EXPECT_EQ(!first.labels.empty(), pp_rank == 1 && v == 1);
      EXPECT_FALSE(first.cu_seqlens.empty());
      EXPECT_EQ(first.num_rows(), first.layout().total_rows() / o.topology.cp());
    }
    EXPECT_EQ(r.num_microbatches() % 2, 0) << "VPP needs a multiple of the group (pp)";
  });
}

}  // namespace
}  // namespace thdpack

namespace thdpack {
namespace {

TEST(PipelineLocal, GivenGroupsGiveTheSameResult) {
  testing::PipelineCase c;
  c.tp = 2;
  c.cp = 2;
  c.dp = 2;
  run_local(c.world_size(), [&](Communicator& world) {
    const PipelineOptions o = testing::options_of(c);
    ProcessGroups g = make_process_groups(world, o.topology);
    Pipeline p(world, *g.dp, *g.tp, o);
    const auto local = testing::local_samples(o, world.rank(), 0, 16);
    const StepResult r = p.run_step(local);
    verify_step(world, o, r, local, [](int64_t id) { return testing::case_sample(id, 0); });
  });
}

TEST(PipelineLocalErrors, GroupsInAnotherOrderAreRejected) {
  testing::PipelineCase c;
  c.cp = 2;
  c.dp = 2;
  test_util::expect_throw_with<InvalidArgument>(
      [&] {
        run_local(c.world_size(), [&](Communicator& world) {
          const PipelineOptions o = testing::options_of(c);
          ProcessGroups g = make_process_groups(world, o.topology);
          Pipeline p(world, *g.cp, *g.tp, o);  // the CP group where the DP group belongs
        });
      },
      "DP group given to the pipeline");
}

}  // namespace
}  // namespace thdpack
