#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// MoE expert-parallel dispatch and combine for packed (THD) inputs (SPEC §9): every EP rank holds
// its own number of tokens T_r; each token goes once to every rank hosting one of its top-k
// experts and comes back summed.
//
// Experts are laid out in contiguous blocks: with E experts over R EP ranks, rank r hosts experts
// [r·E/R, (r+1)·E/R) and local expert id e - r·E/R. Hidden states are float32 rows of `hidden`
// values. The API follows DeepEP's: a layout step (pure, core), dispatch, combine, and a handle
// that records what combine (and the backward passes) need.
//
// Collective order: dispatch, combine and the backward functions are collectives over the EP
// communicator; every EP rank calls them in the same order.

#include <cstdint>
#include <span>
#include <vector>

#include "thdpack/comm/communicator.hpp"
#include "thdpack/moe/moe_routing.hpp"

namespace thdpack {

struct DispatchOptions {
  int num_experts = 1;
  /// Per-local-expert counts are rounded up to a multiple of this (grouped-GEMM alignment).
  int64_t expert_alignment = 1;
  /// HybridEP-style padded mode: every rank's tokens are padded to the maximum over `pad_group`
  /// (the EP group by default; EP x TP when given) rounded up to `pad_alignment`; pad rows route
  /// to no expert with weight 0 and value 0 and are trimmed after combine. Results equal the
  /// unpadded mode exactly.
  bool padded = false;
  int64_t pad_alignment = 64;
  Communicator* pad_group = nullptr;
};

/// What combine and the backward passes need to reverse a dispatch.
struct DispatchHandle {
  int64_t hidden = 0;
  int k = 1;
  int64_t num_tokens = 0;          ///< this rank's tokens as given
  int64_t padded_tokens = 0;       ///< after padding (== num_tokens when not padded)
  std::vector<int64_t> send_rows;  ///< [ranks] rows sent to each rank
  std::vector<int64_t> recv_rows;  ///< [ranks] rows received from each rank
  std::vector<int64_t> row_token;  ///< for each sent row (rank-major, token order): its token
};

struct DispatchResult {
  /// [received rows, hidden]: grouped by source rank, then in the source's token order.
  std::vector<float> hidden;
  /// [received rows, k]: local expert ids, -1 where the expert is not on this rank.
  std::vector<int64_t> topk_idx;
  /// [received rows, k]: the gate weights, 0 where the expert is not on this rank.
  std::vector<float> topk_weights;
  /// [local experts]: received (token, expert) pairs per local expert.
  std::vector<int64_t> tokens_per_expert;
  /// The same rounded up to DispatchOptions::expert_alignment.
  std::vector<int64_t> aligned_tokens_per_expert;
  DispatchHandle handle;
  int64_t num_rows() const {
    return handle.k > 0 ? static_cast<int64_t>(topk_idx.size()) / handle.k : 0;
  }
};

/// Sends each token once to every EP rank hosting one of its experts. `hidden` is [num_tokens,
/// hidden], `topk_idx` and `topk_weights` are [num_tokens, k]. Checks on every rank, with one
/// collective, that all ranks passed valid routing and the same k and hidden size (InvalidArgument
/// naming the first bad rank, on every rank); then one exchange of counts and the rows: hidden
/// states straight into the result and, concurrently, the local expert ids and weights (two
/// alltoallvs in flight together).
DispatchResult dispatch(Communicator& ep, std::span<const float> hidden,
                        std::span<const int64_t> topk_idx, std::span<const float> topk_weights,
                        int64_t num_tokens, int64_t hidden_size, int k,
                        const DispatchOptions& options);

/// Sends expert outputs ([received rows, hidden], in dispatch's row order) back and sums them per
/// source token, unweighted (experts apply their gate weights). Returns [num_tokens, hidden].
std::vector<float> combine(Communicator& ep, std::span<const float> expert_output,
                           const DispatchHandle& handle);

/// combine for rows of any width: `values` is [received rows, columns] in dispatch's row order;
/// returns [num_tokens, columns], each token's rows summed. With columns = k this carries the
/// gradient of the dispatched gate weights back (each (token, expert) pair is local on one rank
/// only, so the sum picks that rank's value when the others are masked to 0).
std::vector<float> combine_values(Communicator& ep, std::span<const float> values, int64_t columns,
                                  const DispatchHandle& handle);

/// Backward of dispatch: the gradient of the received rows, summed back per token (a combine).
std::vector<float> dispatch_backward(Communicator& ep, std::span<const float> grad_rows,
                                     const DispatchHandle& handle);

/// Backward of combine: each token's output gradient sent again to every rank it visited (a
/// dispatch with the cached layout). Returns [received rows, hidden].
std::vector<float> combine_backward(Communicator& ep, std::span<const float> grad_output,
                                    const DispatchHandle& handle);

}  // namespace thdpack
