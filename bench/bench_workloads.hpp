#pragma once
// Inputs shared by the benchmarks: lengths of the named workloads, global batches as scheduler
// inputs, and the cost model of BENCHMARKS.md (a Llama-3-8B-like dense model).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "thdpack/data/workloads.hpp"
#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::bench {

/// The first `n` lengths of workload `name` (padded for its CP size), drawn with the workload's
/// own seed or with `seed` (another input from the same distribution).
std::vector<int64_t> workload_lengths(const std::string& name, int64_t n,
                                      std::optional<uint64_t> seed = std::nullopt);

/// One global batch of a workload at `dp`, with its schedule options.
struct BenchBatch {
  GlobalBatch batch;
  ScheduleOptions options;
  ScheduleInput input() const {
    return {batch.ids, batch.padded_lengths, batch.samples_per_rank, {}};
  }
};

BenchBatch workload_batch(const std::string& name, int dp, int64_t global_batch, int64_t step);

/// The cost model every benchmark uses.
CostModel bench_cost();

}  // namespace thdpack::bench
