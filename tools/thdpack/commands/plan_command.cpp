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
    throw InvalidArgument("--report " + f.report + " is the same file as --plan-out " + f.plan_out +
                          "; write the report somewhere else");
  }
}

// The schedulers a run compares, each with its summary row.
struct Compared {
  std::vector<std::unique_ptr<Scheduler>> schedulers;
  std::vector<SchedulerSummary> summaries;
};

// Every scheduler's plan of one step: checked, evaluated and added to its summary (a scheduler
// that fails keeps its first error and plans no more steps), written to `writer` and, when
// `report` is given, kept for the page.
void plan_step(int64_t step, const GlobalBatch& batch, const ScheduleOptions& options,
               const std::optional<ModelSpec>& model, Compared& compared, PlanFileWriter* writer,
               std::vector<ReportedPlan>* report) {
  const ScheduleInput input{batch.ids, batch.padded_lengths, batch.samples_per_rank, {}};
  if (writer) writer->begin_step(step, batch.ids);
  for (size_t s = 0; s < compared.schedulers.size(); ++s) {
    SchedulerSummary& summary = compared.summaries[s];
    if (!summary.error.empty()) continue;
    try {
      const auto start = std::chrono::steady_clock::now();
      const Plan plan = compared.schedulers[s]->schedule(input, options);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      validate_plan(plan, input, options);
      StepRecord record{evaluate_plan(plan, input, batch.real_lengths, options), seconds, 0};
      if (model) {
        record.tflops =
            training_flops(*model, record.stats.sums.s1_real, record.stats.sums.s2_real) / 1e12;
      }
      if (report) report->push_back({summary.name, plan, record.stats});
      summary.steps.push_back(record);
      if (writer) writer->add_plan(summary.name, plan, batch.padded_lengths);
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
  if (!f.plan_out.empty()) std::cout << "plans written to " << f.plan_out << '\n';
  if (!f.report.empty()) std::cout << "report written to " << f.report << '\n';
}

int run_plan(const PlanFlags& f) {
  if (f.report_step < 0 || f.report_step >= f.steps)
    throw InvalidArgument("--report-step must be in [0, --steps)");
  const Job job = resolve_job(f.job);
  check_outputs(f);
  // The plan file and the report go into place together, once both are complete.
  DeferredCommits outputs;
  if (is_dynamic_cp_scheduler(f.scheduler)) {
    if (f.shapes.tail_align != "none" || f.shapes.fixed_cu_seqlens_entries > 0) {
      throw InvalidArgument(
          "--tail-align and --fixed-cu-seqlens-entries (static shapes) are not "
          "supported by the dynamic CP schedulers; leave them out with "
          "--scheduler " +
          f.scheduler);
    }
    return run_dynamic_cp_plan(job, f.scheduler, f.steps, f.gpu_tflops, f.dynamic_cp,
                               {f.plan_out, f.report, f.report_step}, f.json, std::cout, outputs);
  }
  const ScheduleOptions options = fixed_cp_schedule_options(f, job);
  const PlanRunInfo info = plan_run_info(job, f.steps, f.gpu_tflops);
  const GlobalBatchOptions batch_options = job.batch_options();
  Compared compared;
  for (const auto& name : f.scheduler == "all" ? scheduler_names(CpLayout::kFixed)
                                               : std::vector<std::string>{f.scheduler}) {
    compared.schedulers.push_back(make_scheduler(name));
    compared.summaries.push_back({name, {}, ""});
  }
  std::unique_ptr<PlanFileWriter> writer;
  if (!f.plan_out.empty()) {
    writer = std::make_unique<PlanFileWriter>(f.plan_out, plan_file_head(info));
  }

  std::optional<ModelSpec> model;
  if (!info.model.empty()) model = model_preset(info.model);
  Progress progress("planning", f.steps, !f.no_progress);
  int64_t truncated = 0;
  std::optional<GlobalBatch> report_batch;  // the step the report draws, and its plans
  std::vector<ReportedPlan> report_plans;
  for (int64_t step = 0; step < f.steps; ++step) {
    const GlobalBatch batch = make_global_batch(*job.workload.dataset, step, batch_options);
    truncated += batch.truncated;
    const bool reported = !f.report.empty() && step == f.report_step;
    if (reported) report_batch = batch;
    plan_step(step, batch, options, model, compared, writer.get(),
              reported ? &report_plans : nullptr);
    progress.advance();
  }
  progress.finish();
  if (writer) writer->close();
  const std::vector<SchedulerSummary>& summaries = compared.summaries;
  if (report_batch) {
    write_plan_html_report(f.report,
                           {info, summaries, f.report_step, *report_batch, report_plans, options});
  }
  outputs.commit_all();
  print_summary(f, info, summaries, truncated);
  // Failed schedulers are rows of the table; when none succeeded the run is an error.
  for (const auto& s : summaries) {
    if (s.error.empty()) return 0;
  }
  throw InvalidArgument(summaries.size() == 1 ? summaries[0].name + ": " + summaries[0].error
                                              : "every scheduler failed; " + summaries[0].name +
                                                    ": " + summaries[0].error);
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
