#include "commands/dynamic_cp_plan.hpp"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "flags/flag_values.hpp"
#include "reports/json_output.hpp"
#include "reports/table.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::cli {

void DynamicCpFlags::add_to(CLI::App& command) {
  command
      .add_option("--cp-link-gbps", link_gbps,
                  "dynamic CP cost: ring-attention link bandwidth per rank, GB/s (0: no "
                  "communication cost)")
      ->check(non_negative_number(1e6))
      ->capture_default_str();
  command
      .add_option("--cp-step-overhead-us", step_overhead_us,
                  "dynamic CP cost: fixed microseconds per ring step and layer")
      ->check(non_negative_number(1e9))
      ->capture_default_str();
  command.add_option("--min-cp", min_cp, "dynamic CP: smallest CP group a sample may use")
      ->check(positive_integer(std::numeric_limits<int>::max()))
      ->capture_default_str();
}

PlanRunInfo plan_run_info(const Job& job, int64_t steps, double gpu_tflops) {
  PlanRunInfo info;
  info.workload = job.workload.name;
  info.workload_description = job.workload.description;
  info.topology = job.topology.describe();
  info.dp = job.topology.dp();
  info.cp = job.topology.cp();
  info.pp = job.topology.pp();
  info.max_seqlen_per_dp_cp_rank = job.max_seqlen_per_dp_cp_rank;
  info.capacity = job.capacity();
  info.microbatch_multiple = job.topology.microbatch_multiple();
  info.divisor = job.divisor;
  info.fixed_cp_divisor = job.divisor;
  info.global_batch = job.global_batch;
  info.steps = steps;
  info.model = job.model;
  info.gpu_tflops = gpu_tflops;
  info.cost = job.cost;
  return info;
}

bool is_dynamic_cp_scheduler(const std::string& name) {
  const auto dynamic = scheduler_names(CpLayout::kDynamic);
  return std::find(dynamic.begin(), dynamic.end(), name) != dynamic.end();
}

std::vector<std::string> layout_comparison_schedulers() {
  std::vector<std::string> names{"dp_balanced", "balanced"};
  for (const auto& n : scheduler_names(CpLayout::kDynamic)) names.push_back(n);
  return names;
}

std::vector<DynamicCpSummaryRow> layout_rows(const std::vector<SchedulerSummary>& summaries,
                                             int cp) {
  std::vector<DynamicCpSummaryRow> rows;
  double fastest = std::numeric_limits<double>::infinity();
  for (const auto& s : summaries) {
    DynamicCpSummaryRow row;
    row.name = s.name;
    row.cp = is_dynamic_cp_scheduler(s.name) ? "dynamic" : std::to_string(cp);
    row.error = s.error;
    for (const StepRecord& r : s.steps) {
      row.microbatches += static_cast<double>(r.stats.num_microbatches);
      row.groups += r.groups_per_microbatch;
      row.step += r.modeled_step;
      row.bound += r.step_bound;
    }
    row.ratio = row.step / row.bound;  // each row against a bound of its own layout
    const auto n = static_cast<double>(std::max<size_t>(s.steps.size(), 1));
    row.microbatches /= n;
    row.groups /= n;
    row.step /= n;
    row.bound /= n;
    if (row.error.empty()) fastest = std::min(fastest, row.step);
    rows.push_back(row);
  }
  for (auto& row : rows) row.vs_fastest = row.step / fastest;
  return rows;
}

std::string cost_description(const PlanRunInfo& info, const DynamicCpFlags& flags) {
  return (info.model.empty() ? std::string("direct coefficients") : info.model) + " at " +
         fixed(info.gpu_tflops, 0) + " TFLOP/s, ring link " + fixed(flags.link_gbps, 0) +
         " GB/s, " + fixed(flags.step_overhead_us, 0) + " us per ring step and layer";
}

void print_layout_json(std::ostream& out, const PlanRunInfo& info, const DynamicCpFlags& flags,
                       double lower_bound_mean, const std::vector<DynamicCpSummaryRow>& rows) {
  nlohmann::json j = {{"workload", info.workload},
                      {"ranks", info.dp * info.cp},
                      {"dp", info.dp},
                      {"cp", info.cp},
                      {"steps", info.steps},
                      {"lower_bound_mean", lower_bound_mean},
                      {"cp_link_gbps", flags.link_gbps},
                      {"cp_step_overhead_us", flags.step_overhead_us},
                      {"schedulers", nlohmann::json::array()}};
  for (const auto& row : rows) {
    j["schedulers"].push_back({{"name", row.name},
                               {"cp", row.cp},
                               {"microbatches_mean", row.microbatches},
                               {"groups_per_microbatch", row.groups},
                               {"step_mean", row.step},
                               {"lower_bound_mean", row.bound},
                               {"step_ratio", row.ratio},
                               {"step_vs_fastest", row.vs_fastest},
                               {"error", row.error}});
  }
  out << json_text(j, 2) << '\n';
}

void print_layout_table(std::ostream& out, const PlanRunInfo& info, const DynamicCpFlags& flags,
                        const std::vector<DynamicCpSummaryRow>& rows) {
  out << "workload   " << info.workload << ": " << info.workload_description << '\n'
      << "layout     " << info.topology << " (dynamic CP over all " << info.dp * info.cp
      << " dp x cp ranks, padding divisor " << info.divisor << ")\n"
      << "cost       " << cost_description(info, flags) << "\n"
      << "steps      " << info.steps << " x global batch " << info.global_batch << " samples\n\n";
  Table table({"scheduler", "cp", "mb/step", "groups/mb", "step s", "vs bound", "vs fastest"});
  for (const auto& row : rows) {
    if (!row.error.empty()) {
      table.add_row({row.name, "failed: " + row.error});
      continue;
    }
    table.add_row({row.name, row.cp, fixed(row.microbatches, 1), fixed(row.groups, 1),
                   fixed(row.step, 3), fixed(row.ratio, 4) + "x", fixed(row.vs_fastest, 3) + "x"});
  }
  table.left_align(0);
  table.print(out);
  out << "\nvs bound: against a lower bound for the row's own layout (fixed and dynamic CP pad "
         "and group samples differently, so each has its own bound);\nvs fastest: against the "
         "fastest row, whichever its layout.\n";
}

}  // namespace thdpack::cli
