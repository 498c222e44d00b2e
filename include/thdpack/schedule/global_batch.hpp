#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Which samples make up global batch `step`, and the lengths a scheduler sees for them.
//
// Global batch s of size B takes dataset indices (s·B + j) mod size for j in [0, B). Which DP rank
// holds position j depends on the sample order: contiguous (rank r holds j in [r·B/dp,
// (r+1)·B/dp)) or Megatron's (MegatronPretrainingSampler with one sample per micro-batch: rank r
// holds j = k·dp + r). Global sample ids are dataset indices.

#include <cstdint>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"

namespace thdpack {

/// What to do with a sample whose padded length exceeds the pack capacity C.
enum class OversizePolicy {
  kError,     ///< InvalidArgument naming the sample and the fix (default)
  kTruncate,  ///< keep its first C' tokens, C' = C rounded down to the padding divisor
};

/// Which DP rank holds which sample of a global batch (see the header comment).
enum class SampleOrder {
  kContiguous,  ///< rank r holds a contiguous block
  kMegatron,    ///< rank r holds positions r, r + dp, r + 2·dp, ... (MegatronPretrainingSampler)
};

/// "contiguous", "megatron" and back; parse_sample_order throws InvalidArgument on other names.
std::string sample_order_name(SampleOrder order);
SampleOrder parse_sample_order(const std::string& name);

struct GlobalBatchOptions {
  int64_t global_batch = 0;  ///< B, samples per step; a multiple of dp, <= dataset size
  int dp = 1;
  int64_t divisor = 1;   ///< padding divisor
  int64_t capacity = 0;  ///< C = M·cp
  OversizePolicy oversize = OversizePolicy::kError;
  SampleOrder order = SampleOrder::kContiguous;
};

/// The lengths of one global batch, DP-rank-major (ready for ScheduleInput).
struct GlobalBatch {
  std::vector<int64_t> ids;
  std::vector<int64_t> real_lengths;    ///< after truncation, if any
  std::vector<int64_t> padded_lengths;  ///< real rounded up to the divisor
  std::vector<int64_t> samples_per_rank;
  /// Empty, or one group id per sample (ScheduleInput::group_ids): samples given a group keep
  /// their id (>= 0); the others each get a group of their own, -(1 + position).
  std::vector<int64_t> group_ids;
  int64_t truncated = 0;  ///< samples shortened under OversizePolicy::kTruncate
  /// Whether some sample may carry its own labels or loss mask. The pipeline's gather sets it from
  /// the samples; where it is false, every label and loss weight follows from the tokens, and the
  /// sample exchange moves the tokens alone.
  bool samples_carry_targets = true;
};

/// The real length sample `id` of `length` tokens keeps: `length` when its padded length fits
/// `capacity`; otherwise the longest multiple of `divisor` that fits (kTruncate) or InvalidArgument
/// naming the sample, the cap (`capacity_name`, e.g. "max_seqlen_per_dp_cp_rank x dp x cp" under
/// dynamic CP) and the fix (kError).
int64_t length_within_capacity(int64_t id, int64_t length, int64_t divisor, int64_t capacity,
                               OversizePolicy policy,
                               const std::string& capacity_name = "max_seqlen_per_dp_cp_rank x cp");

/// Dataset indices of global batch `step` in position order j = 0..B-1 (see the header comment).
std::vector<int64_t> global_batch_indices(int64_t step, int64_t global_batch, int64_t dataset_size);

/// The same indices in DP-rank-major order for `order`: rank 0's samples in its local order, then
/// rank 1's, ... (the order a scheduler sees them in). B must be a positive multiple of dp.
std::vector<int64_t> rank_major_indices(std::vector<int64_t> indices, int dp, SampleOrder order);

/// Lengths of global batch `step`. Throws InvalidArgument when B is not a positive multiple of dp,
/// exceeds the dataset, or (kError) a sample does not fit the capacity.
GlobalBatch make_global_batch(const Dataset& dataset, int64_t step,
                              const GlobalBatchOptions& options);

}  // namespace thdpack
