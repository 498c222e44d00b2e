#include "dynamic_cp_plan.hpp"

#include <algorithm>

#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <vector>

#include "dynamic_cp_html_report.hpp"
#include "dynamic_cp_run_info.hpp"
#include "flag_values.hpp"
#include "plan_file_writer.hpp"
#include "table.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::cli {
namespace {

using Row = DynamicCpSummaryRow;

CpCostModel cost_for(const Job& job, double tflops, const DynamicCpFlags& f) {
  return CpCostModel::of_preset_or_coefficients(job.model, job.cost, tflops, f.link_gbps,
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

bool is_dynamic_cp_scheduler(const std::string& name) {
  const auto dynamic = scheduler_names(CpLayout::kDynamic);
  return std::find(dynamic.begin(), dynamic.end(), name) != dynamic.end();
}

int run_dynamic_cp_plan(const Job& job, const std::string& name, int64_t steps, double gpu_tflops,
                        const DynamicCpFlags& flags, const DynamicCpOutputs& outputs, bool json,
                        std::ostream& out) {
  if (!(flags.link_gbps >= 0)) throw InvalidArgument("--cp-link-gbps must be >= 0");
  if (!(flags.step_overhead_us >= 0)) throw InvalidArgument("--cp-step-overhead-us must be >= 0");
  if (flags.min_cp < 1) throw InvalidArgument("--min-cp must be >= 1");
  const CpCostModel cost = cost_for(job, gpu_tflops, flags);
  const Topology& t = job.topology;
  // The dynamic-CP schedulers have no cap on the sequences of a pack: refused rather than ignored.
  if (job.max_sequences_per_pack > 0) {
    throw InvalidArgument(
        "--thd-max-packed-sequences is not supported by the dynamic CP "
        "schedulers; leave it out with --scheduler " +
        name);
  }
  const ScheduleOptions fixed_cp =
      ScheduleOptions::from_topology(t, job.max_seqlen_per_dp_cp_rank, job.cost);
  ScheduleOptions dynamic_cp = fixed_cp;
  dynamic_cp.min_cp = flags.min_cp;
  dynamic_cp.cp_cost = cost;
  const DynamicCpOptions dynamic = dynamic_cp_options(dynamic_cp);
  const bool sequence_parallel = job.divisor != padding_divisor({.cp = t.cp()});
  const int64_t dynamic_divisor = padding_divisor({.cp = t.cp(),
                                                   .tp = t.tp(),
                                                   .sequence_parallel = sequence_parallel,
                                                   .dynamic_cp = true,
                                                   .dp = t.dp()});

  // Fixed CP first, then every dynamic-CP scheduler.
  std::vector<Row> rows(2);
  rows[0].name = "dp_balanced";
  rows[1].name = "balanced";
  rows[0].cp = rows[1].cp = std::to_string(t.cp());
  for (const auto& n : scheduler_names(CpLayout::kDynamic)) {
    rows.emplace_back();
    rows.back().name = n;
    rows.back().cp = "dynamic";
  }
  DynamicCpRunInfo info;
  info.workload = job.workload.name;
  info.topology = t.describe();
  info.dp = t.dp();
  info.cp = t.cp();
  info.max_seqlen_per_dp_cp_rank = job.max_seqlen_per_dp_cp_rank;
  info.microbatch_multiple = dynamic.microbatch_multiple;
  info.min_cp = dynamic.min_cp;
  info.divisor = dynamic_divisor;
  info.fixed_cp_divisor = job.divisor;
  info.cost = cost;
  std::unique_ptr<PlanFileWriter> writer;
  if (!outputs.plan_out.empty()) {
    writer = std::make_unique<PlanFileWriter>(outputs.plan_out, plan_file_head(info));
  }
  // The reported step's input and plans.
  std::optional<GlobalBatch> report_batch;
  std::vector<int64_t> report_lengths;
  double report_bound = 0;
  std::vector<ReportedFixedCpPlan> report_fixed;
  std::vector<ReportedDynamicCpPlan> report_dynamic;

  double bound_sum = 0;
  const GlobalBatchOptions batch_options = job.batch_options();
  for (int64_t step = 0; step < steps; ++step) {
    const GlobalBatch batch = make_global_batch(*job.workload.dataset, step, batch_options);
    std::vector<int64_t> dyn_lengths(batch.real_lengths.size());
    for (size_t i = 0; i < dyn_lengths.size(); ++i) {
      dyn_lengths[i] = round_up(batch.real_lengths[i], dynamic_divisor);
    }
    const double bound = evaluate_dynamic_cp_plan(Plan(dynamic.dp, dynamic.cp), batch.ids,
                                                  dyn_lengths, dynamic, cost)
                             .lower_bound;
    bound_sum += bound;
    const bool reported = !outputs.report.empty() && step == outputs.report_step;
    if (reported) {
      report_batch = batch;
      report_lengths = dyn_lengths;
      report_bound = bound;
    }
    if (writer) writer->begin_step(step, batch.ids);
    const ScheduleInput input{batch.ids, batch.padded_lengths, batch.samples_per_rank, {}};
    for (size_t r = 0; r < 2; ++r) {
      Row& row = rows[r];
      if (!row.error.empty()) continue;
      try {
        const Plan plan = make_scheduler(row.name)->schedule(input, fixed_cp);
        row.microbatches += static_cast<double>(plan.num_microbatches());
        row.groups += t.dp();
        row.step += fixed_cp_modeled_step(plan, batch.ids, batch.padded_lengths, t.cp(), cost);
        if (writer) writer->add_plan(row.name, plan, batch.padded_lengths);
        if (reported) report_fixed.push_back({row.name, plan});
      } catch (const InvalidArgument& e) {
        row.error = "step " + std::to_string(step) + ": " + e.what();
      }
    }
    for (size_t r = 2; r < rows.size(); ++r) {
      Row& row = rows[r];
      if (!row.error.empty()) continue;
      try {
        const Plan plan =
            make_scheduler(row.name)->schedule({batch.ids, dyn_lengths, {}, {}}, dynamic_cp);
        check_dynamic_cp_plan(plan, batch.ids, dyn_lengths, dynamic);
        const DynamicCpStats stats =
            evaluate_dynamic_cp_plan(plan, batch.ids, dyn_lengths, dynamic, cost);
        row.microbatches += static_cast<double>(stats.microbatches);
        row.groups += static_cast<double>(stats.groups) / static_cast<double>(stats.microbatches);
        row.step += stats.step;
        if (writer) writer->add_plan(row.name, plan, dyn_lengths);
        if (reported) report_dynamic.push_back({row.name, plan});
      } catch (const InvalidArgument& e) {
        row.error = "step " + std::to_string(step) + ": " + e.what();
      }
    }
    if (writer) writer->end_step();
  }
  const auto n = static_cast<double>(steps);
  for (auto& row : rows) {
    row.ratio = row.step / bound_sum;
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
        {info, job.workload.description, steps, job.global_batch, outputs.report_step,
         cost_description, rows, report_batch->ids, report_lengths, report_batch->padded_lengths,
         report_bound, report_fixed, report_dynamic});
  }
  if (json) {
    nlohmann::json j = {{"workload", job.workload.name},
                        {"ranks", dynamic.ranks()},
                        {"dp", t.dp()},
                        {"cp", t.cp()},
                        {"steps", steps},
                        {"lower_bound_mean", bound_sum / n},
                        {"cp_link_gbps", flags.link_gbps},
                        {"cp_step_overhead_us", flags.step_overhead_us},
                        {"schedulers", nlohmann::json::array()}};
    for (const auto& row : rows) {
      j["schedulers"].push_back({{"name", row.name},
                                 {"cp", row.cp},
                                 {"microbatches_mean", row.microbatches},
                                 {"groups_per_microbatch", row.groups},
                                 {"step_mean", row.step},
                                 {"step_ratio", row.ratio},
                                 {"error", row.error}});
    }
    out << j.dump(2) << '\n';
  } else {
    out << "workload   " << job.workload.name << ": " << job.workload.description << '\n'
        << "layout     " << t.describe() << " (dynamic CP over all " << dynamic.ranks()
        << " dp x cp ranks, padding divisor " << dynamic_divisor << ")\n"
        << "cost       " << cost_description << "\n"
        << "steps      " << steps << " x global batch " << job.global_batch << " samples\n\n";
    Table table({"scheduler", "cp", "mb/step", "groups/mb", "step s", "vs bound"});
    for (const auto& row : rows) {
      if (!row.error.empty()) {
        table.add_row({row.name, "failed: " + row.error});
        continue;
      }
      table.add_row({row.name, row.cp, fixed(row.microbatches, 1), fixed(row.groups, 1),
                     fixed(row.step, 3), fixed(row.ratio, 4) + "x"});
    }
    table.left_align(0);
    table.print(out);
    if (!outputs.plan_out.empty()) out << "plans written to " << outputs.plan_out << '\n';
    if (!outputs.report.empty()) out << "report written to " << outputs.report << '\n';
  }
  for (const auto& row : rows) {
    if (row.name == name && !row.error.empty()) return 2;
  }
  return 0;
}

}  // namespace thdpack::cli
