#pragma once
// What `thdpack run` prints: a header, one line per step (rank 0), and a summary; the traffic
// figures are reduced over all ranks.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "flags/job_flags.hpp"
#include "thdpack/comm/communicator.hpp"
#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack::cli {

/// One step's figures, as rank 0 reports them.
struct RunStepFigures {
  int64_t step = 0;
  int64_t microbatches = 0;
  int64_t samples = 0;
  double real_tokens = 0;
  double fill = 0;
  double step_ratio = 0;         ///< modeled step / lower bound, configured scheduler
  double dp_balanced_ratio = 0;  ///< the same for dp_balanced (0 if it cannot plan the batch)
  int64_t exchange_bytes = 0;    ///< summed over ranks
  int64_t exchange_minimum = 0;  ///< each moved token once, CP slices only, summed over ranks
  int64_t broadcast_bytes = 0;   ///< summed over ranks
  int64_t bytes_per_rank_max = 0;
  int64_t collectives_max = 0;
  double seconds_max = 0;
  bool verified = false;
  std::vector<double> replica_over_bound;              ///< per DP replica, configured scheduler
  std::vector<double> dp_balanced_replica_over_bound;  ///< the same for dp_balanced, or empty
};

class RunReport {
 public:
  RunReport(Communicator& world, const Job& job, const PipelineOptions& options, bool json);
  void begin();
  /// Collective over the world (two allreduces).
  void step(int64_t step, const StepResult& result, bool verified);
  void finish();
  /// Rank 0 writes the steps so far as an HTML page (run_html_report.hpp); other ranks nothing.
  void write_html(const std::string& path) const;

 private:
  /// Step figures of a dynamic-CP step (rank 0).
  void dynamic_cp_figures(const StepResult& result, RunStepFigures& figures) const;
  Communicator& world_;
  const Job& job_;
  const PipelineOptions& options_;
  bool json_;
  std::vector<RunStepFigures> steps_;
};

}  // namespace thdpack::cli
