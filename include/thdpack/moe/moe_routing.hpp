#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Routing layout of MoE expert parallelism (pure; used by dispatch in moe_dispatch.hpp).
//
// Experts are laid out in contiguous blocks: with E experts over R EP ranks, rank r hosts experts
// [r·E/R, (r+1)·E/R).

#include <cstdint>
#include <span>
#include <vector>

namespace thdpack {

/// Where tokens go (computed locally from the routing).
struct RoutingLayout {
  int ranks = 1;
  int num_experts = 1;
  int64_t num_tokens = 0;
  int k = 1;
  std::vector<int64_t> tokens_per_rank;    ///< [ranks] tokens sent to each rank (once each)
  std::vector<int64_t> tokens_per_expert;  ///< [num_experts] (token, expert) pairs
  std::vector<uint8_t> token_in_rank;      ///< [num_tokens * ranks] 1 if the token visits the rank
};

/// The layout of `topk_idx` ([num_tokens, k] row-major, -1 = no expert). Throws InvalidArgument on
/// an expert id outside [-1, num_experts), a size mismatch, or num_experts not divisible by ranks.
RoutingLayout routing_layout(std::span<const int64_t> topk_idx, int64_t num_tokens, int k,
                             int num_experts, int ranks);

/// The EP rank hosting `expert` (experts in contiguous blocks).
inline int expert_rank(int64_t expert, int num_experts, int ranks) {
  return static_cast<int>(expert / (num_experts / ranks));
}

}  // namespace thdpack
