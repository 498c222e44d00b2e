#pragma once
// What `thdpack plan` prints: per-scheduler summaries over steps as a table or JSON, and the plans
// themselves as a JSON file anyone can check.

#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "thdpack/data/output_file.hpp"

#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::cli {

struct PlanRunInfo {
  std::string workload;
  std::string workload_description;
  std::string topology;
  int dp = 1;
  int cp = 1;
  int pp = 1;
  int64_t max_seqlen_per_dp_cp_rank = 0;
  int64_t capacity = 0;
  int microbatch_multiple = 1;
  int min_cp = 1;
  int64_t divisor = 1;  ///< the compared schedulers' padding divisor (dynamic CP's, if any)
  int64_t fixed_cp_divisor = 1;  ///< the fixed-CP plans' (the same as divisor in a fixed-CP run)
  int64_t global_batch = 0;
  int64_t steps = 0;
  std::string model;  ///< preset name, or "" for direct coefficients
  double gpu_tflops = 0;
  CostModel cost;
};

/// One scheduler's plan of the step a report draws (stats: fixed-CP plans' statistics).
struct ReportedPlan {
  std::string scheduler;
  Plan plan;
  PlanStats stats;
};

struct StepRecord {
  PlanStats stats;
  double plan_seconds = 0;
  double tflops = 0;  ///< model training TFLOPs of the step's real tokens (0 without a model)
  /// When a run compares CP layouts (a dynamic-CP scheduler named), under the CP cost model:
  /// the modeled step, a lower bound for the plan's own layout, and CP groups per micro-batch.
  double modeled_step = 0;
  double step_bound = 0;
  double groups_per_microbatch = 0;
};

struct SchedulerSummary {
  std::string name;
  std::vector<StepRecord> steps;
  std::string error;  ///< set when the scheduler failed; steps then holds the ones before
};

/// Header lines and one row per scheduler.
void print_plan_table(std::ostream& out, const PlanRunInfo& info,
                      const std::vector<SchedulerSummary>& summaries);

/// The same figures as JSON (means over steps, plus every step's figures).
nlohmann::json plan_json(const PlanRunInfo& info, const std::vector<SchedulerSummary>& summaries);

/// A JSON document {head fields..., "steps": [step, ...]} streamed to an OutputFile one step at a
/// time: refused when the path is an input in use, and in place only after close() (a run that
/// fails leaves what was at the path).
class StepsJsonFile {
 public:
  StepsJsonFile(const std::string& path, const nlohmann::ordered_json& head);
  /// Starts the next step's text (after the separator); write the step's object to it.
  std::ostringstream& begin_step();
  /// The current step's text.
  std::ostringstream& text() { return out_; }
  /// Writes out the step's text.
  void end_step();
  /// Ends the document and puts the file in place (once).
  void close();

 private:
  void flush();

  OutputFile file_;
  std::ostringstream out_;
  bool first_step_ = true;
  bool closed_ = false;
};

/// What `plan --plan-out` records about a run in the plan file's head (PlanFileWriter), with any
/// scheduler: the layout, the padding divisors, the sequence limits and the cost model's fields
/// under "cost".
nlohmann::ordered_json plan_file_head(const PlanRunInfo& info);

}  // namespace thdpack::cli
