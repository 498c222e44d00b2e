#pragma once
// `thdpack plan --scheduler <dynamic CP> --plan-out FILE.json`: the plans of every step, fixed CP
// and dynamic CP, as a JSON file anyone can check (tests/cli/check_dynamic_cp_plan_file.py does):
//
//   {"format": "thdpack-dynamic-cp-plans-v1", "workload", "topology", "dp", "cp", "ranks" (dp·cp),
//    "max_seqlen_per_dp_cp_rank", "microbatch_multiple", "min_cp", "divisor" (dynamic CP),
//    "fixed_cp_divisor", "cost": {the CP cost model's fields},
//    "steps": [{"step", "ids", "padded_lengths" (to the dynamic divisor),
//               "fixed_cp_padded_lengths",
//               "fixed_cp_plans": {"<scheduler>": [[ids of replica 0, ...] per micro-batch]},
//               "plans": {"<dynamic scheduler>": {
//                   "microbatches": [{"groups": [{"first_rank", "size", "ranks", "ids"}]}],
//                   "sample_groups": [[micro-batch, group] of each id, in "ids" order]}}}]}
//
// A scheduler that failed on a step has no entry for it. The file is an OutputFile: in place only
// after close(); a run that fails leaves what was at the path.

#include <cstdint>
#include <span>
#include <string>

#include "plan_report.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::cli {

/// What the file's head records about the run.
struct DynamicCpRunInfo {
  std::string workload;
  std::string topology;
  int dp = 1;
  int cp = 1;
  int64_t max_seqlen_per_dp_cp_rank = 0;
  int microbatch_multiple = 1;
  int min_cp = 1;
  int64_t divisor = 1;
  int64_t fixed_cp_divisor = 1;
  CpCostModel cost;
};

class DynamicCpPlanWriter {
 public:
  DynamicCpPlanWriter(const std::string& path, const DynamicCpRunInfo& info);
  void begin_step(int64_t step, std::span<const int64_t> ids,
                  std::span<const int64_t> padded_lengths,
                  std::span<const int64_t> fixed_cp_padded_lengths);
  void add_fixed_cp_plan(const std::string& scheduler, const Plan& plan);
  void add_dynamic_cp_plan(const std::string& scheduler, const DynamicCpPlan& plan);
  void end_step();
  void close();

 private:
  StepsJsonFile file_;
  std::span<const int64_t> step_ids_;
  bool first_fixed_ = true;
  bool first_dynamic_ = true;
  bool in_dynamic_ = false;
};

}  // namespace thdpack::cli
