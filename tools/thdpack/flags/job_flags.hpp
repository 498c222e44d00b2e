#pragma once
// The flags `plan` and `run` share (workload, layout, cap, global batch, cost model, oversize
// policy) and the job they describe once resolved.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "flags/topology_options.hpp"
#include "flags/workload_source.hpp"
#include "thdpack/core/topology.hpp"
#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/global_batch.hpp"

namespace thdpack::cli {

struct JobFlags {
  WorkloadFlags workload;
  TopologyFlags topology;
  int64_t max_seqlen_per_dp_cp_rank = 0;
  int64_t global_batch = 0;
  std::string model = "llama3-8b";
  double cost_linear = -1;
  double cost_quadratic = -1;
  std::string oversize = "error";
  const CLI::Option* model_flag = nullptr;  ///< set by add_to; tells whether --model was given
  std::string sample_order = "contiguous";
  int64_t max_sequences_per_pack = 0;

  void add_to(CLI::App& command);
};

struct Job {
  ResolvedWorkload workload;
  Topology topology;
  int64_t divisor = 1;
  int64_t max_seqlen_per_dp_cp_rank = 0;
  int64_t global_batch = 0;
  CostModel cost;
  std::string model;  ///< preset name, or "" for direct coefficients
  OversizePolicy oversize = OversizePolicy::kError;
  SampleOrder sample_order = SampleOrder::kContiguous;
  int64_t max_sequences_per_pack = 0;  ///< 0: no cap

  /// C = M x cp; resolve_job has checked that it fits in int64.
  int64_t capacity() const { return max_seqlen_per_dp_cp_rank * topology.cp(); }
  GlobalBatchOptions batch_options() const;
};

/// Resolves the flags: M defaults to the workload's, --seq-length, or the longest sample; the
/// global batch to the workload's reference batch for this dp, else 32 per replica.
Job resolve_job(const JobFlags& flags);

}  // namespace thdpack::cli
