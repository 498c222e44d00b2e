#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Checks a pipeline step end to end, on every rank (the `thdpack run` verification and the tests'):
//   - this rank's micro-batches equal reference_microbatches for its coordinates, field by field;
//   - every rank of one DP index (with dynamic CP: of one dp×cp index) holds bit-identical
//     metadata (cu_seqlens, cu_seqlens_padded, max_seqlen, sample ids), also intermediate PP
//     stages and TP ranks > 0;
//   - the micro-batch count and the step's length sums are identical on every rank;
//   - tokens are conserved: the real tokens the first stage holds (TP rank 0, all DP and CP ranks)
//     are exactly the tokens the readers started with, by count and by a position-weighted
//     checksum.

#include <functional>

#include "thdpack/comm/communicator.hpp"
#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack {

/// Collective over `world` (one allgather, plus two more when something failed). Throws
/// InternalError on every rank naming the first failed check (and the rank) if any check fails on
/// any rank. `local_samples` are what this rank passed to run_step; `sample_of(id)` returns any
/// sample of the step (for the reference).
void verify_step(Communicator& world, const PipelineOptions& options, const StepResult& result,
                 std::span<const Sample> local_samples,
                 const std::function<Sample(int64_t)>& sample_of);

}  // namespace thdpack
