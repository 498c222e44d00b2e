// MoE dispatch and combine on the local-thread communicator at 2, 4 and 8 ranks (the routing
// layout alone: tests/moe).

#include <gtest/gtest.h>

#include "moe_case.hpp"
#include "thdpack/comm/local_communicator.hpp"

namespace thdpack {
namespace {

class MoeLocal : public ::testing::TestWithParam<int> {};

TEST_P(MoeLocal, DispatchCombineAndBackward) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    run_local(GetParam(), [seed](Communicator& ep) { testing::check_moe_dispatch(ep, seed); });
  }
}

TEST_P(MoeLocal, InvalidRoutingFailsOnEveryRank) {
  run_local(GetParam(), [](Communicator& ep) { testing::check_moe_validation(ep); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, MoeLocal, ::testing::Values(2, 4, 8));

}  // namespace
}  // namespace thdpack
