#pragma once
// One pipeline configuration run end to end on any Communicator, checked against the
// single-process reference on every rank. Shared by the local-thread unit tests and the MPI tests.

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "thdpack/comm/communicator.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack::testing {

struct PipelineCase {
  int tp = 1, pp = 1, cp = 1, dp = 1, vpp = 1;
  ReadingMode reading = ReadingMode::kMegatron;
  std::string scheduler = "balanced";
  int64_t steps = 2;
  int64_t samples_per_replica = 8;
  OversizePolicy oversize = OversizePolicy::kError;
  // Static shapes and the sequence cap (PipelineOptions).
  TailAlign tail_align = TailAlign::kNone;
  int64_t tail_multiple = 0;
  TailPolicy tail_policy = TailPolicy::kAppendDummySeq;
  int64_t fixed_cu_seqlens_entries = 0;
  int64_t max_sequences_per_pack = 0;
  bool tokens_on_last_stage = false;
  int64_t max_seqlen_per_dp_cp_rank = 512;  ///< M (below 500, long samples need CP)
  bool sequence_parallel = false;
  int64_t first_step = 0;  ///< steps first_step .. first_step + steps - 1 (other batches)

  int world_size() const { return tp * pp * cp * dp; }
  std::string name() const;
};

/// gtest prints a case by its name.
inline void PrintTo(const PipelineCase& c, std::ostream* os) {
  *os << c.name();
}

PipelineOptions options_of(const PipelineCase& c);

/// The test dataset: short lognormal samples with distinct tokens, every fifth with a loss mask.
const Dataset& case_dataset();

/// Sample `id` as local_samples gives it in `step`: in even steps without its loss mask (no sample
/// carries one, so the exchange sends tokens alone), in odd steps as case_dataset() has it (some
/// do, so the exchange sends rows). Runs of two steps or more check both wire formats.
Sample case_sample(int64_t id, int64_t step);

/// Samples `rank` reads for `step` (case_sample; empty on non-readers).
std::vector<Sample> local_samples(const PipelineOptions& options, int rank, int64_t step,
                                  int64_t global_batch);

/// What a run reports on this rank.
struct CaseOutcome {
  int64_t steps = 0;
  int64_t microbatches = 0;  ///< of the last step
  int64_t collectives_max = 0;
};

/// Runs the case on `world` and verifies every step with verify_step (throws on failure, on every
/// rank). Collective over `world`.
CaseOutcome run_case(Communicator& world, const PipelineCase& c);

/// The (tp, pp, cp, dp) layouts of the test matrix.
std::vector<PipelineCase> layout_matrix();

/// Every layout in both reading modes, with and without VPP (pp > 1 only), with every scheduler.
std::vector<PipelineCase> full_matrix();

/// Dynamic-CP layouts (dp 2 x cp 2, dp 4 x cp 2, dp 2 x cp 4 with tp 2 and sequence parallelism,
/// pp 2 with and without VPP, dp 8 x cp 1) with both dynamic-CP schedulers and both reading
/// modes, at M = 128 so that long samples need CP groups of 2 and 4.
std::vector<PipelineCase> dynamic_cp_matrix();

}  // namespace thdpack::testing
