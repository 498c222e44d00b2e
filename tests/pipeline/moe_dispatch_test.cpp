// MoE dispatch and combine on the local-thread communicator at 2, 4 and 8 ranks, and the routing
// layout.

#include <gtest/gtest.h>

#include "expect_throw.hpp"
#include "moe_case.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/moe/moe_routing.hpp"

namespace thdpack {
namespace {

TEST(MoeRouting, CountsTokensOncePerRank) {
  // 4 experts on 2 ranks (0,1 | 2,3); token 0 -> experts 0 and 1 (rank 0 once), token 1 -> 1, 3.
  const std::vector<int64_t> topk = {0, 1, 1, 3, -1, 2};
  const RoutingLayout l = routing_layout(topk, 3, 2, 4, 2);
  EXPECT_EQ(l.tokens_per_rank, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(l.tokens_per_expert, (std::vector<int64_t>{1, 2, 1, 1}));
  EXPECT_EQ(l.token_in_rank, (std::vector<uint8_t>{1, 0, 1, 1, 0, 1}));
  test_util::expect_throw_with<InvalidArgument>(
      [&] {
        routing_layout({{0, 4}}, 1, 2, 4, 2);
      },
      {"topk_idx[0][1] = 4", "outside [-1, 4)"});
  test_util::expect_throw_with<InvalidArgument>([&] { routing_layout(topk, 3, 2, 5, 2); },
                                                "divisible");
}

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
