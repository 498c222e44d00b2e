// The reordering exchange over real MPI ranks (2, 4 and 6): every rank's result equals the
// single-process reference, synchronous and overlapped (a background thread; MPI initialised with
// MPI_THREAD_SERIALIZED), windows of 1 to 3; uniform costs move nothing; bad samples fail on
// every rank; vision and language modules of different DP sizes agree.

#include <gtest/gtest.h>
#include <mpi.h>

#include "reorder_case.hpp"
#include "thdpack/comm/mpi_communicator.hpp"

namespace thdpack {
namespace {

MpiCommunicator world() {
  return MpiCommunicator(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = 60});
}

TEST(ReorderMpi, EqualsTheSingleProcessReference) {
  MpiCommunicator g = world();
  for (int window : {1, 2, 3}) {
    testing::ReorderCase c;
    c.microbatch_size = 4 * g.size();
    c.microbatches = 5;
    c.window = window;
    c.seed = 20 + static_cast<uint64_t>(window);
    testing::check_reorder_exchange(g, c);
  }
}

TEST(ReorderMpi, UniformCostsMoveNothing) {
  MpiCommunicator g = world();
  testing::check_reorder_uniform_costs_move_nothing(g);
}

TEST(ReorderMpi, BadSamplesFailOnEveryRank) {
  MpiCommunicator g = world();
  testing::check_reorder_errors(g);
}

TEST(ReorderMpi, HeterogeneousModulesAgree) {
  MpiCommunicator g = world();
  if (g.size() == 6) testing::check_reorder_heterogeneous_modules(g, 2, 4);
  if (g.size() == 4) testing::check_reorder_heterogeneous_modules(g, 1, 3);
  if (g.size() == 2) testing::check_reorder_heterogeneous_modules(g, 1, 1);
}

}  // namespace
}  // namespace thdpack
