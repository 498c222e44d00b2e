// The pipeline over real MPI ranks: every case of the test matrix (and of the dynamic-CP matrix)
// whose world size matches mpirun's -np, both reading modes, with and without VPP, every scheduler;
// every rank's micro-batches checked against the single-process reference, metadata bit-identical
// across the world, token conservation (verify_step). Plus failures that must reach every rank.

#include <gtest/gtest.h>
#include <mpi.h>

#include "pipeline_case.hpp"
#include "thdpack/comm/mpi_communicator.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

using testing::PipelineCase;

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

class PipelineMpi : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(PipelineMpi, EveryRankMatchesTheReference) {
  const PipelineCase c = GetParam();
  if (c.world_size() != world_size()) GTEST_SKIP() << "needs " << c.world_size() << " ranks";
  MpiCommunicator world(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = 120});
  const testing::CaseOutcome outcome = testing::run_case(world, c);
  EXPECT_EQ(outcome.steps, c.steps);
  EXPECT_LE(outcome.collectives_max, 4);
  // Every rank ended with the same micro-batch count (verify_step checks it too).
  std::vector<int64_t> k = {outcome.microbatches, -outcome.microbatches};
  world.allreduce(k, ReduceOp::kMax);
  EXPECT_EQ(k[0], -k[1]);
}

INSTANTIATE_TEST_SUITE_P(Matrix, PipelineMpi, ::testing::ValuesIn(testing::full_matrix()),
                         [](const auto& info) { return info.param.name(); });

// Dynamic CP: every rank's slice of its CP group in every micro-batch equals
// rank_microbatches (verify_step), over several batches.
INSTANTIATE_TEST_SUITE_P(DynamicCp, PipelineMpi, ::testing::ValuesIn(testing::dynamic_cp_matrix()),
                         [](const auto& info) { return info.param.name(); });

TEST(PipelineMpiErrors, InconsistentOptionsFailOnEveryRankWithoutHanging) {
  MpiCommunicator world(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = 60});
  PipelineCase c;
  c.dp = world.size();
  PipelineOptions o = testing::options_of(c);
  if (world.rank() == world.size() - 1) o.scheduler = "dp_balanced";
  try {
    Pipeline p(world, o);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string want = "ranks disagree on scheduler: rank 0 has 'balanced', rank " +
                             std::to_string(world.size() - 1) + " has 'dp_balanced'";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(PipelineMpiErrors, DisagreeingReadersFailOnEveryRank) {
  MpiCommunicator world(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = 60});
  if (world.size() % 2 != 0) GTEST_SKIP();
  PipelineCase c;
  c.cp = 2;
  c.dp = world.size() / 2;
  const PipelineOptions o = testing::options_of(c);
  Pipeline p(world, o);
  auto local = testing::local_samples(o, world.rank(), 0, 8 * c.dp);
  if (o.topology.coordinates(world.rank()).cp == 1) {
    // A longer but valid sample: the readers disagree, neither holds a malformed one.
    Sample& s = local.front();
    s.input_ids.push_back(3);
    if (!s.loss_mask.empty()) s.loss_mask.push_back(1);
    if (!s.labels.empty()) s.labels.push_back(3);
  }
  try {
    p.run_step(local);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("must hold the same samples"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace thdpack
