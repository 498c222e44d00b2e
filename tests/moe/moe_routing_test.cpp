// The MoE routing layout (include/thdpack/moe/moe_routing.hpp): tokens per rank and expert, each
// token counted once per destination rank, and bad routes refused.

#include "thdpack/moe/moe_routing.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"

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

}  // namespace
}  // namespace thdpack
