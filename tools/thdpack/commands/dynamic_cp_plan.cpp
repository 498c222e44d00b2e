#include "commands/dynamic_cp_plan.hpp"

#include <algorithm>

#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <vector>

#include "flags/flag_values.hpp"
#include "reports/dynamic_cp_html_report.hpp"
#include "reports/json_output.hpp"
#include "reports/plan_file_writer.hpp"
#include "reports/table.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::cli {
namespace {

using Row = DynamicCpSummaryRow;

CostModel cost_for(const Job& job, double tflops, const DynamicCpFlags& f) {
  return CostModel::of_preset_or_coefficients(job.model, job.cost, tflops, f.link_gbps,
                                              f.step_overhead_us);
}

}  // namespace

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

namespace {

// What every step of the run plans with, resolved once from the job and flags.
struct DynamicCpSetup {
  ScheduleOptions fixed_cp;    ///< the fixed-CP schedulers' (dp_balanced, balanced)
  ScheduleOptions dynamic_cp;  ///< the dynamic-CP schedulers'
  int64_t divisor = 1;         ///< dynamic CP's padding divisor
  CostModel cost;
};

DynamicCpSetup setup_of(const Job& job, double gpu_tflops, const DynamicCpFlags& flags,
                        const std::string& name) {
  if (!(flags.link_gbps >= 0)) throw InvalidArgument("--cp-link-gbps must be >= 0");
  if (!(flags.step_overhead_us >= 0)) throw InvalidArgument("--cp-step-overhead-us must be >= 0");
  if (flags.min_cp < 1) throw InvalidArgument("--min-cp must be >= 1");
  // The dynamic-CP schedulers have no cap on the sequences of a pack: refused rather than ignored.
  if (job.max_sequences_per_pack > 0) {
    throw InvalidArgument(
        "--thd-max-packed-sequences is not supported by the dynamic CP "
        "schedulers; leave it out with --scheduler " +
        name);
  }
  const Topology& t = job.topology;
  DynamicCpSetup s;
  s.cost = cost_for(job, gpu_tflops, flags);
  s.fixed_cp = ScheduleOptions::from_topology(t, job.max_seqlen_per_dp_cp_rank, job.cost);
  s.dynamic_cp = s.fixed_cp;
  s.dynamic_cp.min_cp = flags.min_cp;
  s.dynamic_cp.cost = s.cost;
  const bool sequence_parallel = job.divisor != padding_divisor({.cp = t.cp()});
  s.divisor = padding_divisor({.cp = t.cp(),
                               .tp = t.tp(),
                               .sequence_parallel = sequence_parallel,
                               .dynamic_cp = true,
                               .dp = t.dp(),
                               .min_cp = flags.min_cp});
  return s;
}

PlanRunInfo run_info_of(const Job& job, int64_t steps, double gpu_tflops, const DynamicCpSetup& s) {
  PlanRunInfo info = plan_run_info(job, steps, gpu_tflops);
  info.capacity = job.max_seqlen_per_dp_cp_rank * s.dynamic_cp.ranks();
  info.min_cp = s.dynamic_cp.min_cp;
  info.divisor = s.divisor;
  info.cost = s.cost;
  return info;
}

// Fixed CP first (dp_balanced, balanced), then every dynamic-CP scheduler.
std::vector<Row> rows_of(const Topology& t) {
  std::vector<Row> rows(2);
  rows[0].name = "dp_balanced";
  rows[1].name = "balanced";
  rows[0].cp = rows[1].cp = std::to_string(t.cp());
  for (const auto& n : scheduler_names(CpLayout::kDynamic)) {
    rows.emplace_back();
    rows.back().name = n;
    rows.back().cp = "dynamic";
  }
  return rows;
}

// The plans of one step, added up in `rows` (a scheduler that fails keeps its first error and
// plans no more steps), written to `writer` and, when `report` is given, kept for the page.
struct ReportedPlans {
  std::vector<ReportedPlan> fixed;
  std::vector<ReportedPlan> dynamic;
};
void plan_step(int64_t step, const GlobalBatch& batch, std::span<const int64_t> dyn_lengths,
               const DynamicCpSetup& s, int dp, int cp, std::vector<Row>& rows,
               PlanFileWriter* writer, ReportedPlans* report) {
  if (writer) writer->begin_step(step, batch.ids);
  for (Row& row : rows) {
    if (!row.error.empty()) continue;
    try {
      if (row.cp != "dynamic") {
        const Plan plan = make_scheduler(row.name)->schedule(
            {batch.ids, batch.padded_lengths, batch.samples_per_rank, {}}, s.fixed_cp);
        row.microbatches += static_cast<double>(plan.num_microbatches());
        row.groups += dp;
        row.step += fixed_cp_modeled_step(plan, batch.ids, batch.padded_lengths, cp, s.cost);
        row.bound += fixed_cp_step_lower_bound(batch.padded_lengths, dp, cp, s.cost);
        if (writer) writer->add_plan(row.name, plan, batch.padded_lengths);
        if (report) report->fixed.push_back({row.name, plan, {}});
        continue;
      }
      const Plan plan =
          make_scheduler(row.name)->schedule({batch.ids, dyn_lengths, {}, {}}, s.dynamic_cp);
      check_dynamic_cp_plan(plan, batch.ids, dyn_lengths, s.dynamic_cp);
      const PlanStats stats =
          evaluate_dynamic_cp_plan(plan, batch.ids, dyn_lengths, s.dynamic_cp, s.cost);
      row.microbatches += static_cast<double>(stats.num_microbatches);
      row.groups +=
          static_cast<double>(stats.num_groups) / static_cast<double>(stats.num_microbatches);
      row.step += stats.step_cost;
      row.bound += stats.step_lower_bound;
      if (writer) writer->add_plan(row.name, plan, dyn_lengths);
      if (report) report->dynamic.push_back({row.name, plan, stats});
    } catch (const InvalidArgument& e) {
      row.error = message("step ", step, ": ", e.what());
    }
  }
  if (writer) writer->end_step();
}

void print_json(std::ostream& out, const Job& job, int64_t steps, const DynamicCpSetup& s,
                const DynamicCpFlags& flags, double lower_bound_mean,
                const std::vector<Row>& rows) {
  nlohmann::json j = {{"workload", job.workload.name},
                      {"ranks", s.dynamic_cp.ranks()},
                      {"dp", job.topology.dp()},
                      {"cp", job.topology.cp()},
                      {"steps", steps},
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

void print_table(std::ostream& out, const Job& job, int64_t steps, const DynamicCpSetup& s,
                 const std::string& cost_description, const std::vector<Row>& rows) {
  out << "workload   " << job.workload.name << ": " << job.workload.description << '\n'
      << "layout     " << job.topology.describe() << " (dynamic CP over all "
      << s.dynamic_cp.ranks() << " dp x cp ranks, padding divisor " << s.divisor << ")\n"
      << "cost       " << cost_description << "\n"
      << "steps      " << steps << " x global batch " << job.global_batch << " samples\n\n";
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

}  // namespace

int run_dynamic_cp_plan(const Job& job, const std::string& name, int64_t steps, double gpu_tflops,
                        const DynamicCpFlags& flags, const DynamicCpOutputs& outputs, bool json,
                        std::ostream& out, DeferredCommits& files) {
  const DynamicCpSetup s = setup_of(job, gpu_tflops, flags, name);
  const Topology& t = job.topology;
  std::vector<Row> rows = rows_of(t);
  const PlanRunInfo info = run_info_of(job, steps, gpu_tflops, s);
  std::unique_ptr<PlanFileWriter> writer;
  if (!outputs.plan_out.empty()) {
    writer = std::make_unique<PlanFileWriter>(outputs.plan_out, plan_file_head(info));
  }
  // The reported step's input and plans.
  std::optional<GlobalBatch> report_batch;
  std::vector<int64_t> report_lengths;
  double report_bound = 0;
  ReportedPlans reported_plans;

  double bound_sum = 0;
  const GlobalBatchOptions batch_options = job.batch_options();
  for (int64_t step = 0; step < steps; ++step) {
    const GlobalBatch batch = make_global_batch(*job.workload.dataset, step, batch_options);
    std::vector<int64_t> dyn_lengths(batch.real_lengths.size());
    for (size_t i = 0; i < dyn_lengths.size(); ++i) {
      dyn_lengths[i] = round_up(batch.real_lengths[i], s.divisor);
    }
    const double bound =
        evaluate_dynamic_cp_plan(Plan(t.dp(), t.cp()), batch.ids, dyn_lengths, s.dynamic_cp, s.cost)
            .step_lower_bound;
    bound_sum += bound;
    const bool reported = !outputs.report.empty() && step == outputs.report_step;
    if (reported) {
      report_batch = batch;
      report_lengths = dyn_lengths;
      report_bound = bound;
    }
    plan_step(step, batch, dyn_lengths, s, t.dp(), t.cp(), rows, writer.get(),
              reported ? &reported_plans : nullptr);
  }
  const auto n = static_cast<double>(steps);
  double fastest = std::numeric_limits<double>::infinity();
  for (const auto& row : rows) {
    if (row.error.empty()) fastest = std::min(fastest, row.step);
  }
  for (auto& row : rows) {
    row.ratio = row.step / row.bound;  // each row against a bound of its own layout
    row.vs_fastest = row.step / fastest;
    row.bound /= n;
    row.microbatches /= n;
    row.groups /= n;
    row.step /= n;
  }
  if (writer) writer->close();
  const std::string cost_description =
      (job.model.empty() ? std::string("direct coefficients") : job.model) + " at " +
      fixed(gpu_tflops, 0) + " TFLOP/s, ring link " + fixed(flags.link_gbps, 0) + " GB/s, " +
      fixed(flags.step_overhead_us, 0) + " us per ring step and layer";
  if (report_batch) {
    write_dynamic_cp_html_report(
        outputs.report,
        {info, outputs.report_step, cost_description, rows, report_batch->ids, report_lengths,
         report_batch->padded_lengths, report_bound,
         fixed_cp_step_lower_bound(report_batch->padded_lengths, t.dp(), t.cp(), s.cost),
         reported_plans.fixed, reported_plans.dynamic});
  }
  files.commit_all();
  if (json) {
    print_json(out, job, steps, s, flags, bound_sum / n, rows);
  } else {
    print_table(out, job, steps, s, cost_description, rows);
    if (!outputs.plan_out.empty()) out << "plans written to " << outputs.plan_out << '\n';
    if (!outputs.report.empty()) out << "report written to " << outputs.report << '\n';
  }
  for (const auto& row : rows) {
    if (row.name == name && !row.error.empty()) return 2;
  }
  return 0;
}

}  // namespace thdpack::cli
