#include "thdpack/moe/moe_routing.hpp"

#include "thdpack/core/errors.hpp"

namespace thdpack {

RoutingLayout routing_layout(std::span<const int64_t> topk_idx, int64_t num_tokens, int k,
                             int num_experts, int ranks) {
  if (num_tokens < 0 || k < 1 || ranks < 1 || num_experts < ranks || num_experts % ranks != 0) {
    fail("routing needs tokens >= 0, k >= 1 and a number of experts (", num_experts,
         ") divisible by the EP size (", ranks, ")");
  }
  check(static_cast<int64_t>(topk_idx.size()) == num_tokens * k, "topk_idx has ", topk_idx.size(),
        " entries, expected ", num_tokens, " tokens x k=", k);
  RoutingLayout l;
  l.ranks = ranks;
  l.num_experts = num_experts;
  l.num_tokens = num_tokens;
  l.k = k;
  l.tokens_per_rank.assign(static_cast<size_t>(ranks), 0);
  l.tokens_per_expert.assign(static_cast<size_t>(num_experts), 0);
  l.token_in_rank.assign(static_cast<size_t>(num_tokens * ranks), 0);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int j = 0; j < k; ++j) {
      const int64_t e = topk_idx[static_cast<size_t>(t * k + j)];
      if (e == -1) continue;
      check(e >= -1 && e < num_experts, "topk_idx[", t, "][", j, "] = ", e, " is outside [-1, ",
            num_experts, ")");
      ++l.tokens_per_expert[static_cast<size_t>(e)];
      const int r = expert_rank(e, num_experts, ranks);
      uint8_t& visits = l.token_in_rank[static_cast<size_t>(t * ranks + r)];
      if (!visits) ++l.tokens_per_rank[static_cast<size_t>(r)];
      visits = 1;
    }
  }
  return l;
}

}  // namespace thdpack
