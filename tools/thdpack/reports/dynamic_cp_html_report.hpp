#pragma once
// What `thdpack plan --report FILE.html` shows in front of the fixed-CP sections when the run
// compares CP layouts (a dynamic-CP scheduler named; plan_html_report.hpp writes the page): the
// means over every step, the modeled step of each scheduler on the reported step against its
// layout's lower bound, then per rank how each plan spends that step: fixed CP per DP replica
// (every rank of a replica runs its packs on cp ranks), dynamic CP per dp·cp rank (each
// micro-batch the time of the CP group holding the rank, then idle until the slowest group ends),
// with every micro-batch's CP groups (size, member ranks, samples, tokens, time) in tables.
//
// Every drawn number is also in data-* attributes (data-scheduler, data-replica, data-rank,
// data-k, data-group-size, data-part, data-value; data-step-seconds on each scheduler's heading)
// for tests to read back.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reports/plan_report.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::cli {

/// One scheduler's means over every step (the rows `plan` prints).
struct DynamicCpSummaryRow {
  std::string name;
  std::string cp;  ///< the fixed cp, or "dynamic"
  double microbatches = 0;
  double groups = 0;  ///< CP groups per micro-batch (fixed CP: dp)
  double step = 0;
  double bound = 0;       ///< a lower bound for this row's layout (fixed CP or dynamic CP)
  double ratio = 0;       ///< step / bound
  double vs_fastest = 0;  ///< step / the fastest row's step (layouts compared with each other)
  std::string error;
};

/// What the page draws: the run, every scheduler's means, and the plans of step `step`.
struct DynamicCpReportInput {
  const PlanRunInfo& info;
  int64_t step = 0;
  std::string cost_description;
  const std::vector<DynamicCpSummaryRow>& rows;
  std::span<const int64_t> ids;
  std::span<const int64_t> padded_lengths;           ///< to the dynamic-CP divisor
  std::span<const int64_t> fixed_cp_padded_lengths;  ///< to the fixed-CP divisor
  double lower_bound = 0;                            ///< of step `step`, for dynamic-CP plans
  double fixed_lower_bound = 0;                      ///< of step `step`, for fixed-CP plans
  const std::vector<ReportedPlan>& fixed;
  const std::vector<ReportedPlan>& dynamic;
};

/// The sections (HTML) comparing the layouts.
std::string layout_comparison_html(const DynamicCpReportInput& input);

}  // namespace thdpack::cli
