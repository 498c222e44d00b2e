#pragma once
// `thdpack plan --report FILE.html`, with any scheduler: one self-contained HTML page (inline SVG
// and CSS, a few lines of inline script, nothing fetched) that shows each fixed-CP scheduler's plan
// of one step as pictures (after the layout comparison of dynamic_cp_html_report.hpp when the run
// compares CP layouts):
// modeled time per DP replica split into its micro-batches with the straggler marked, micro-batch
// counts against the bound over every step, pack fill, CP work per rank and padding, each with the
// numbers in a table and on hover.
//
// Every drawn number is also in data-* attributes (data-scheduler, data-replica, data-k,
// data-step, data-bin, data-cp-rank, data-value, ...) and the page sets
// document.body.dataset.rendered = "ok" once its script ran, so tests can read the page back.

#include <cstdint>
#include <string>
#include <vector>

#include "reports/dynamic_cp_html_report.hpp"
#include "reports/plan_report.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::cli {

/// What the report draws: the run, every step's summaries, and the plans of step `step`, of the
/// fixed-CP schedulers (info, with the fixed-CP capacity and divisor; options, theirs); when the
/// run compares CP layouts, `layouts` too, drawn first.
struct PlanReportInput {
  const PlanRunInfo& info;
  const std::vector<SchedulerSummary>& summaries;
  int64_t step = 0;
  const GlobalBatch& batch;
  const std::vector<ReportedPlan>& plans;
  const ScheduleOptions& options;
  const DynamicCpReportInput* layouts = nullptr;
};

/// Writes the page to `path`. Throws InvalidArgument when the file cannot be written.
void write_plan_html_report(const std::string& path, const PlanReportInput& input);

}  // namespace thdpack::cli
