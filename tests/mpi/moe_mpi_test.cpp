// MoE dispatch and combine over real MPI ranks (2, 4 and 8): identity and linear experts against
// dense references, padded == unpadded, backward adjoints, and invalid routing failing on every
// rank.

#include <gtest/gtest.h>
#include <mpi.h>

#include "moe_case.hpp"
#include "thdpack/comm/mpi_communicator.hpp"

namespace thdpack {
namespace {

TEST(MoeMpi, DispatchCombineAndBackward) {
  MpiCommunicator ep(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = 60});
  for (uint64_t seed : {1u, 2u, 3u, 4u}) testing::check_moe_dispatch(ep, seed);
}

TEST(MoeMpi, InvalidRoutingFailsOnEveryRank) {
  MpiCommunicator ep(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = 60});
  testing::check_moe_validation(ep);
}

}  // namespace
}  // namespace thdpack
