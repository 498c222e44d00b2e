#pragma once
// What `thdpack plan` adds when it compares CP layouts (a dynamic-CP scheduler named): the dynamic
// CP flags, and the side-by-side table, JSON and rows of fixed CP (dp_balanced, balanced) and
// dynamic CP under the CP cost model (docs/schedulers.md). The plans themselves come from the
// plan command's one step loop.

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "flags/job_flags.hpp"
#include "reports/dynamic_cp_html_report.hpp"
#include "reports/plan_report.hpp"
#include "thdpack/schedule/cost_model.hpp"

namespace thdpack::cli {

// Largest --gpu-tflops taken (plan and run): far beyond any GPU, small enough that times stay
// meaningful.
inline constexpr double kMaxGpuTflops = 1e6;

struct DynamicCpFlags {
  double link_gbps = kDefaultCpLinkGBps;
  double step_overhead_us = kDefaultCpStepOverheadUs;
  int min_cp = 1;

  void add_to(CLI::App& command);
};

/// What every `plan` run records of its job (plan file head, report, JSON): with a fixed-CP
/// layout; a run comparing layouts then sets its own capacity, min_cp, divisor and cost.
PlanRunInfo plan_run_info(const Job& job, int64_t steps, double gpu_tflops);

/// True for the names of dynamic-CP schedulers.
bool is_dynamic_cp_scheduler(const std::string& name);

/// The schedulers a run comparing layouts plans with: dp_balanced and balanced at the layout's
/// fixed cp, then every dynamic-CP scheduler over all dp·cp ranks.
std::vector<std::string> layout_comparison_schedulers();

/// One row per scheduler: the means of its steps' micro-batches, CP groups, modeled step and
/// bound, the step against its layout's bound and against the fastest row.
std::vector<DynamicCpSummaryRow> layout_rows(const std::vector<SchedulerSummary>& summaries,
                                             int cp);

/// One line naming the CP cost model's inputs as the table and page print them: the model preset
/// (or "direct coefficients"), --gpu-tflops, --cp-link-gbps and --cp-step-overhead-us.
std::string cost_description(const PlanRunInfo& info, const DynamicCpFlags& flags);

void print_layout_table(std::ostream& out, const PlanRunInfo& info, const DynamicCpFlags& flags,
                        const std::vector<DynamicCpSummaryRow>& rows);
void print_layout_json(std::ostream& out, const PlanRunInfo& info, const DynamicCpFlags& flags,
                       double lower_bound_mean, const std::vector<DynamicCpSummaryRow>& rows);

}  // namespace thdpack::cli
