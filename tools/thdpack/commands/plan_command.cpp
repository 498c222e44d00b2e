// `thdpack plan`: with this data and this parallel layout, how many micro-batches, how much
// padding, how imbalanced, what modeled step time, for each scheduler. No communication, no GPUs.

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "commands/dynamic_cp_plan.hpp"
#include "flags/flag_values.hpp"
#include "flags/job_flags.hpp"
#include "flags/static_shape_flags.hpp"
#include "reports/json_output.hpp"
#include "reports/plan_file_writer.hpp"
#include "reports/plan_html_report.hpp"
#include "reports/plan_report.hpp"
#include "reports/progress.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/data/workloads.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::cli {
namespace {

struct PlanFlags {
  JobFlags job;
  int64_t steps = 10;
  std::string scheduler = "all";
  double gpu_tflops = 400;
  bool json = false;
  std::string plan_out;
  std::string report;
  int64_t report_step = 0;
  bool no_progress = false;
  DynamicCpFlags dynamic_cp;
  StaticShapeFlags shapes;  ///< the fixed-CP plan's sequence cap follows fixed_cu_seqlens_entries
};

// The scheduler options `thdpack run` would plan with for the same flags (schedule_options_of of
// the pipeline options), so that the plan command and a run plan alike.
ScheduleOptions fixed_cp_schedule_options(const PlanFlags& f, const Job& job) {
  PipelineOptions o;
  o.topology = job.topology;
  o.max_seqlen_per_dp_cp_rank = job.max_seqlen_per_dp_cp_rank;
  o.cost = job.cost;
  o.max_sequences_per_pack = job.max_sequences_per_pack;
  f.shapes.apply_to(o);
  return schedule_options_of(o);
}

// --plan-out and --report, checked against the inputs (leased while the job lives) and against
// each other before planning, so a refused output leaves every file as it was.
void check_outputs(const PlanFlags& f) {
  std::vector<std::string> outputs;
  if (!f.plan_out.empty()) outputs.push_back(f.plan_out);
  if (!f.report.empty()) outputs.push_back(f.report);
  refuse_replacing_inputs(outputs);
  if (outputs.size() == 2 && std::filesystem::weakly_canonical(f.plan_out) ==
                                 std::filesystem::weakly_canonical(f.report)) {
    fail("--report ", f.report, " is the same file as --plan-out ", f.plan_out,
         "; write the report somewhere else");
  }
}

// What a run plans with: its schedulers (one summary each), the options of each layout and, when
// it compares CP layouts, the dynamic-CP padding divisor and the CP cost model.
struct PlanSetup {
  PlanRunInfo info;
  std::vector<SchedulerSummary> summaries;
  ScheduleOptions fixed_cp;    ///< the fixed-CP schedulers'
  ScheduleOptions dynamic_cp;  ///< the dynamic-CP schedulers' (comparing layouts only)
  bool compares_layouts = false;
};

// A dynamic-CP scheduler named: dp_balanced and balanced at the fixed cp beside every dynamic-CP
// scheduler, all under the CP cost model (CostModel::of_preset_or_coefficients).
PlanSetup layout_comparison_setup(const PlanFlags& f, const Job& job) {
  if (f.shapes.tail_align != "none" || f.shapes.fixed_cu_seqlens_entries > 0) {
    fail(
        "--tail-align and --fixed-cu-seqlens-entries (static shapes) are not supported by the "
        "dynamic CP schedulers; leave them out with --scheduler ",
        f.scheduler);
  }
  // The dynamic-CP schedulers have no cap on the sequences of a pack: refused rather than ignored.
  if (job.max_sequences_per_pack > 0) {
    fail(
        "--thd-max-packed-sequences is not supported by the dynamic CP schedulers; leave it out "
        "with --scheduler ",
        f.scheduler);
  }
  const Topology& t = job.topology;
  PlanSetup s;
  s.compares_layouts = true;
  s.fixed_cp = ScheduleOptions::from_topology(t, job.max_seqlen_per_dp_cp_rank, job.cost);
  s.dynamic_cp = s.fixed_cp;
  s.dynamic_cp.min_cp = f.dynamic_cp.min_cp;
  s.dynamic_cp.cost = CostModel::of_preset_or_coefficients(
      job.model, job.cost, f.gpu_tflops, f.dynamic_cp.link_gbps, f.dynamic_cp.step_overhead_us);
  s.info = plan_run_info(job, f.steps, f.gpu_tflops);
  s.info.capacity = job.max_seqlen_per_dp_cp_rank * s.dynamic_cp.ranks();
  s.info.min_cp = f.dynamic_cp.min_cp;
  s.info.divisor =
      padding_divisor({.cp = t.cp(),
                       .tp = t.tp(),
                       .sequence_parallel = job.divisor != padding_divisor({.cp = t.cp()}),
                       .dynamic_cp = true,
                       .dp = t.dp(),
                       .min_cp = f.dynamic_cp.min_cp});
  s.info.cost = s.dynamic_cp.cost;
  for (const auto& name : layout_comparison_schedulers()) s.summaries.push_back({name, {}, ""});
  return s;
}

PlanSetup plan_setup(const PlanFlags& f, const Job& job) {
  if (is_dynamic_cp_scheduler(f.scheduler)) return layout_comparison_setup(f, job);
  PlanSetup s;
  s.fixed_cp = fixed_cp_schedule_options(f, job);
  s.info = plan_run_info(job, f.steps, f.gpu_tflops);
  for (const auto& name : f.scheduler == "all" ? scheduler_names(CpLayout::kFixed)
                                               : std::vector<std::string>{f.scheduler}) {
    s.summaries.push_back({name, {}, ""});
  }
  return s;
}

// One step's samples as each layout's schedulers see them: fixed CP's padded lengths and, when
// comparing layouts, the same samples padded to the dynamic-CP divisor.
struct StepLengths {
  const GlobalBatch& batch;
  std::vector<int64_t> dynamic;
};

// One scheduler's plan of one step, checked and evaluated (under the CP cost model too when the run
// compares layouts); throws InvalidArgument when the scheduler fails.
StepRecord plan_one(const Scheduler& scheduler, const StepLengths& step, const PlanSetup& s,
                    const std::optional<ModelSpec>& model, Plan& plan) {
  const GlobalBatch& batch = step.batch;
  StepRecord record;
  const auto start = std::chrono::steady_clock::now();
  if (scheduler.layout() == CpLayout::kDynamic) {
    plan = scheduler.schedule({batch.ids, step.dynamic, {}, {}}, s.dynamic_cp);
    record.plan_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    check_dynamic_cp_plan(plan, batch.ids, step.dynamic, s.dynamic_cp);
    record.stats =
        evaluate_dynamic_cp_plan(plan, batch.ids, step.dynamic, s.dynamic_cp, s.dynamic_cp.cost);
    record.modeled_step = record.stats.step_cost;
    record.step_bound = record.stats.step_lower_bound;
    record.groups_per_microbatch = static_cast<double>(record.stats.num_groups) /
                                   static_cast<double>(record.stats.num_microbatches);
  } else {
    const ScheduleInput input{batch.ids, batch.padded_lengths, batch.samples_per_rank, {}};
    plan = scheduler.schedule(input, s.fixed_cp);
    record.plan_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    validate_plan(plan, input, s.fixed_cp);
    record.stats = evaluate_plan(plan, input, batch.real_lengths, s.fixed_cp);
    if (s.compares_layouts) {
      const int dp = s.fixed_cp.dp, cp = s.fixed_cp.cp;
      record.modeled_step =
          fixed_cp_modeled_step(plan, batch.ids, batch.padded_lengths, cp, s.dynamic_cp.cost);
      record.step_bound =
          fixed_cp_step_lower_bound(batch.padded_lengths, dp, cp, s.dynamic_cp.cost);
      record.groups_per_microbatch = dp;
    }
  }
  if (model) {
    record.tflops =
        training_flops(*model, record.stats.sums.s1_real, record.stats.sums.s2_real) / 1e12;
  }
  return record;
}

// Every scheduler's plan of one step, added to its summary (a scheduler that fails keeps its first
// error and plans no more steps), written to `writer` and, when `report` is given, kept for the
// page.
void plan_step(int64_t step, const StepLengths& lengths, PlanSetup& s,
               const std::vector<std::unique_ptr<Scheduler>>& schedulers,
               const std::optional<ModelSpec>& model, PlanFileWriter* writer,
               std::vector<ReportedPlan>* report) {
  if (writer) writer->begin_step(step, lengths.batch.ids);
  for (size_t i = 0; i < schedulers.size(); ++i) {
    SchedulerSummary& summary = s.summaries[i];
    if (!summary.error.empty()) continue;
    try {
      Plan plan;
      const StepRecord record = plan_one(*schedulers[i], lengths, s, model, plan);
      if (report) report->push_back({summary.name, plan, record.stats});
      summary.steps.push_back(record);
      const bool dynamic = schedulers[i]->layout() == CpLayout::kDynamic;
      if (writer) {
        writer->add_plan(summary.name, plan,
                         dynamic ? std::span<const int64_t>(lengths.dynamic)
                                 : std::span<const int64_t>(lengths.batch.padded_lengths));
      }
    } catch (const InvalidArgument& e) {
      summary.error = message("step ", step, ": ", e.what());
    }
  }
  if (writer) writer->end_step();
}

void print_summary(const PlanFlags& f, const PlanRunInfo& info,
                   const std::vector<SchedulerSummary>& summaries, int64_t truncated) {
  if (f.json) {
    auto j = plan_json(info, summaries);
    j["truncated_samples"] = truncated;
    std::cout << json_text(j, 2) << '\n';
    return;
  }
  print_plan_table(std::cout, info, summaries);
  if (truncated > 0) {
    std::cout << "note: " << truncated << " samples were truncated to the capacity\n";
  }
}

// The step the report draws: its batch, the samples padded for dynamic CP, its plans and (comparing
// layouts) each layout's lower bound.
struct ReportedStep {
  std::optional<GlobalBatch> batch;
  std::vector<int64_t> dynamic_lengths;
  std::vector<ReportedPlan> plans;
  double dynamic_bound = 0;
};

// The page: with a layout comparison, that first, then the fixed-CP schedulers in detail.
void write_report(const PlanFlags& f, const PlanSetup& s,
                  const std::vector<DynamicCpSummaryRow>& rows, const ReportedStep& r) {
  const GlobalBatch& batch = *r.batch;
  if (!s.compares_layouts) {
    write_plan_html_report(f.report,
                           {s.info, s.summaries, f.report_step, batch, r.plans, s.fixed_cp});
    return;
  }
  std::vector<ReportedPlan> fixed_plans, dynamic_plans;
  for (const auto& p : r.plans) {
    (is_dynamic_cp_scheduler(p.scheduler) ? dynamic_plans : fixed_plans).push_back(p);
  }
  std::vector<SchedulerSummary> fixed_summaries;
  for (const auto& summary : s.summaries) {
    if (!is_dynamic_cp_scheduler(summary.name)) fixed_summaries.push_back(summary);
  }
  PlanRunInfo fixed_info = s.info;  // the fixed-CP plans' capacity, divisor and cost
  fixed_info.capacity = s.fixed_cp.capacity();
  fixed_info.divisor = s.info.fixed_cp_divisor;
  fixed_info.cost = s.fixed_cp.cost;
  const DynamicCpReportInput layouts{s.info,
                                     f.report_step,
                                     cost_description(s.info, f.dynamic_cp),
                                     rows,
                                     batch.ids,
                                     r.dynamic_lengths,
                                     batch.padded_lengths,
                                     r.dynamic_bound,
                                     fixed_cp_step_lower_bound(batch.padded_lengths, s.fixed_cp.dp,
                                                               s.fixed_cp.cp, s.dynamic_cp.cost),
                                     fixed_plans,
                                     dynamic_plans};
  write_plan_html_report(f.report, {fixed_info, fixed_summaries, f.report_step, batch, fixed_plans,
                                    s.fixed_cp, &layouts});
}

int run_plan(const PlanFlags& f) {
  if (f.report_step < 0 || f.report_step >= f.steps)
    throw InvalidArgument("--report-step must be in [0, --steps)");
  const Job job = resolve_job(f.job);
  check_outputs(f);
  PlanSetup s = plan_setup(f, job);
  std::vector<std::unique_ptr<Scheduler>> schedulers;
  for (const auto& summary : s.summaries) schedulers.push_back(make_scheduler(summary.name));
  // The plan file and the report go into place together, once both are complete.
  DeferredCommits outputs;
  std::unique_ptr<PlanFileWriter> writer;
  if (!f.plan_out.empty()) {
    writer = std::make_unique<PlanFileWriter>(f.plan_out, plan_file_head(s.info));
  }
  std::optional<ModelSpec> model;
  if (!s.info.model.empty()) model = model_preset(s.info.model);
  const GlobalBatchOptions batch_options = job.batch_options();
  Progress progress("planning", f.steps, !f.no_progress);
  int64_t truncated = 0;
  double dynamic_bound_sum = 0;  // comparing layouts: the dynamic-CP lower bound of every step
  ReportedStep reported;
  for (int64_t step = 0; step < f.steps; ++step) {
    const GlobalBatch batch = make_global_batch(*job.workload.dataset, step, batch_options);
    truncated += batch.truncated;
    StepLengths lengths{batch, {}};
    double dynamic_bound = 0;
    if (s.compares_layouts) {
      for (int64_t length : batch.real_lengths) {
        lengths.dynamic.push_back(round_up(length, s.info.divisor));
      }
      dynamic_bound = evaluate_dynamic_cp_plan(Plan(s.fixed_cp.dp, s.fixed_cp.cp), batch.ids,
                                               lengths.dynamic, s.dynamic_cp, s.dynamic_cp.cost)
                          .step_lower_bound;
      dynamic_bound_sum += dynamic_bound;
    }
    const bool drawn = !f.report.empty() && step == f.report_step;
    if (drawn) reported = {batch, lengths.dynamic, {}, dynamic_bound};
    plan_step(step, lengths, s, schedulers, model, writer.get(), drawn ? &reported.plans : nullptr);
    progress.advance();
  }
  progress.finish();
  if (writer) writer->close();
  const std::vector<SchedulerSummary>& summaries = s.summaries;
  std::vector<DynamicCpSummaryRow> rows;
  if (s.compares_layouts) rows = layout_rows(summaries, s.fixed_cp.cp);
  if (reported.batch) write_report(f, s, rows, reported);
  outputs.commit_all();
  if (s.compares_layouts && f.json) {
    print_layout_json(std::cout, s.info, f.dynamic_cp,
                      dynamic_bound_sum / static_cast<double>(f.steps), rows);
  } else if (s.compares_layouts) {
    print_layout_table(std::cout, s.info, f.dynamic_cp, rows);
  } else {
    print_summary(f, s.info, summaries, truncated);
  }
  if (!f.json) {
    if (!f.plan_out.empty()) std::cout << "plans written to " << f.plan_out << '\n';
    if (!f.report.empty()) std::cout << "report written to " << f.report << '\n';
  }
  if (s.compares_layouts) {  // the named scheduler failed: exit code 2, its error in the table
    for (const auto& summary : summaries) {
      if (summary.name == f.scheduler && !summary.error.empty()) return 2;
    }
    return 0;
  }
  // Failed schedulers are rows of the table; when none succeeded the run is an error.
  for (const auto& summary : summaries) {
    if (summary.error.empty()) return 0;
  }
  fail(summaries.size() == 1 ? "" : "every scheduler failed; ", summaries[0].name, ": ",
       summaries[0].error);
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  auto* cmd = app.add_subcommand(
      "plan",
      "plan micro-batches for a workload and layout and compare schedulers (default: the sft-8k "
      "workload at dp 8)");
  flags->job.add_to(*cmd);
  cmd->add_option("--steps", flags->steps, "global batches to plan")
      ->check(positive_integer(kMaxSteps))
      ->capture_default_str();
  std::string names = "all";
  for (const auto& n : scheduler_names()) names += ", " + n;
  cmd->add_option("--scheduler,--sequence-packing-scheduler", flags->scheduler,
                  "scheduler: " + names + " (a dynamic CP scheduler is shown beside fixed CP)")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_option("--gpu-tflops", flags->gpu_tflops,
                  "achieved TFLOP/s per GPU, to show the modeled step time in seconds")
      ->check(positive_number(kMaxGpuTflops))
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "print the figures as JSON");
  cmd->add_option(
         "--plan-out", flags->plan_out,
         "write the plans (per step, micro-batch and DP replica, the ordered global sample "
         "ids; with a dynamic CP scheduler also each micro-batch's CP groups: size, member ranks, "
         "samples) to this JSON file")
      ->check(non_empty());
  cmd->add_option(
         "--report", flags->report,
         "write a self-contained HTML page with pictures of the plans (modeled time per "
         "DP replica and micro-batch, micro-batch counts, pack fill, CP work, padding; with "
         "a dynamic CP scheduler, fixed and dynamic CP side by side per rank)")
      ->check(non_empty());
  cmd->add_option("--report-step", flags->report_step, "the step the report's pictures show")
      ->check(non_negative_integer())
      ->capture_default_str();
  cmd->add_flag("--no-progress", flags->no_progress, "no progress bar");
  flags->dynamic_cp.add_to(*cmd);
  flags->shapes.add_to(*cmd);
  return {cmd, [flags] { return run_plan(*flags); }};
}

}  // namespace thdpack::cli
