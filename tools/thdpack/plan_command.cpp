// `thdpack plan`: with this data and this parallel layout, how many micro-batches, how much
// padding, how imbalanced, what modeled step time, for each scheduler. No communication, no GPUs.

#include <chrono>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "plan_report.hpp"
#include "progress.hpp"
#include "thdpack/errors.hpp"
#include "thdpack/global_batch.hpp"
#include "thdpack/packed_batch.hpp"
#include "thdpack/plan_stats.hpp"
#include "thdpack/scheduler.hpp"
#include "thdpack/workloads.hpp"
#include "topology_options.hpp"
#include "workload_source.hpp"

namespace thdpack::cli {
namespace {

struct PlanFlags {
  WorkloadFlags workload;
  TopologyFlags topology;
  int64_t max_seqlen_per_dp_cp_rank = 0;
  int64_t global_batch = 0;
  int64_t steps = 10;
  std::string scheduler = "all";
  std::string model = "llama3-8b";
  double cost_linear = -1;
  double cost_quadratic = -1;
  double gpu_tflops = 400;
  std::string oversize = "error";
  bool json = false;
  std::string plan_out;
  bool no_progress = false;
};

// M when neither the flag nor the workload gives one: the longest sample, rounded up so that one
// sample fills at most one pack.
int64_t default_cap(const Dataset& dataset, int cp, int64_t divisor) {
  int64_t longest = 0;
  for (int64_t i = 0; i < dataset.size(); ++i) longest = std::max(longest, dataset.length(i));
  const int64_t capacity = round_up(longest, divisor);
  return (capacity + cp - 1) / cp;
}

CostModel resolve_cost(const PlanFlags& f, std::string& model_name) {
  if (f.cost_linear >= 0 || f.cost_quadratic >= 0) {
    model_name.clear();
    return CostModel::from_coefficients(std::max(f.cost_linear, 0.0),
                                        std::max(f.cost_quadratic, 0.0));
  }
  model_name = f.model;
  return CostModel::from_model(model_preset(f.model));
}

int run_plan(const PlanFlags& f) {
  ResolvedWorkload w = resolve_workload(f.workload);
  const Topology topology = f.topology.resolve(w.cp.value_or(1));
  const int64_t divisor =
      padding_divisor({topology.cp(), topology.tp(), f.topology.sequence_parallel});
  const int64_t m = f.max_seqlen_per_dp_cp_rank > 0 ? f.max_seqlen_per_dp_cp_rank
                    : w.max_seqlen_per_dp_cp_rank   ? *w.max_seqlen_per_dp_cp_rank
                                                  : default_cap(*w.dataset, topology.cp(), divisor);
  PlanRunInfo info;
  const CostModel cost = resolve_cost(f, info.model);
  const ScheduleOptions options = ScheduleOptions::from_topology(topology, m, cost);

  info.workload = w.name;
  info.workload_description = w.description;
  info.topology = topology.describe();
  info.dp = topology.dp();
  info.cp = topology.cp();
  info.max_seqlen_per_dp_cp_rank = m;
  info.capacity = options.capacity();
  info.divisor = divisor;
  info.global_batch = f.global_batch > 0 ? f.global_batch
                      : w.workload_name
                          ? default_global_batch(workload(*w.workload_name), topology.dp())
                          : int64_t{32} * topology.dp();
  info.steps = f.steps;
  info.gpu_tflops = f.gpu_tflops;
  info.cost = cost;
  if (f.steps < 1) throw InvalidArgument("--steps must be >= 1");
  if (f.gpu_tflops <= 0) throw InvalidArgument("--gpu-tflops must be > 0");

  GlobalBatchOptions batch_options;
  batch_options.global_batch = info.global_batch;
  batch_options.dp = topology.dp();
  batch_options.divisor = divisor;
  batch_options.capacity = options.capacity();
  if (f.oversize == "truncate") {
    batch_options.oversize = OversizePolicy::kTruncate;
  } else if (f.oversize != "error") {
    throw InvalidArgument("--oversize must be 'error' or 'truncate', got '" + f.oversize + "'");
  }

  std::vector<std::string> names =
      f.scheduler == "all" ? scheduler_names() : std::vector<std::string>{f.scheduler};
  std::vector<std::unique_ptr<Scheduler>> schedulers;
  std::vector<SchedulerSummary> summaries;
  for (const auto& name : names) {
    schedulers.push_back(make_scheduler(name));
    summaries.push_back({name, {}, ""});
  }
  std::unique_ptr<PlanWriter> writer;
  if (!f.plan_out.empty()) writer = std::make_unique<PlanWriter>(f.plan_out, info);

  std::optional<ModelSpec> model;
  if (!info.model.empty()) model = model_preset(info.model);
  Progress progress("planning", f.steps, !f.no_progress);
  int64_t truncated = 0;
  for (int64_t step = 0; step < f.steps; ++step) {
    const GlobalBatch batch = make_global_batch(*w.dataset, step, batch_options);
    truncated += batch.truncated;
    const ScheduleInput input{batch.ids, batch.padded_lengths, batch.samples_per_rank, {}};
    if (writer) writer->begin_step(step, batch);
    for (size_t s = 0; s < schedulers.size(); ++s) {
      SchedulerSummary& summary = summaries[s];
      if (!summary.error.empty()) continue;
      try {
        const auto start = std::chrono::steady_clock::now();
        const Plan plan = schedulers[s]->schedule(input, options);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        validate_plan(plan, input, options);
        StepRecord record{evaluate_plan(plan, input, batch.real_lengths, options), seconds, 0};
        if (model)
          record.tflops =
              training_flops(*model, record.stats.sums.s1_real, record.stats.sums.s2_real) / 1e12;
        summary.steps.push_back(record);
        if (writer) writer->add_plan(summary.name, plan);
      } catch (const InvalidArgument& e) {
        summary.error = "step " + std::to_string(step) + ": " + e.what();
      }
    }
    if (writer) writer->end_step();
    progress.advance();
  }
  progress.finish();
  if (writer) writer->close();

  if (f.json) {
    auto j = plan_json(info, summaries);
    j["truncated_samples"] = truncated;
    std::cout << j.dump(2) << '\n';
  } else {
    print_plan_table(std::cout, info, summaries);
    if (truncated > 0)
      std::cout << "note: " << truncated << " samples were truncated to the capacity\n";
    if (!f.plan_out.empty()) std::cout << "plans written to " << f.plan_out << '\n';
  }
  for (const auto& s : summaries) {
    if (!s.error.empty() && summaries.size() == 1) return 2;
  }
  return 0;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  auto* cmd = app.add_subcommand(
      "plan",
      "plan micro-batches for a workload and layout and compare schedulers (default: the sft-8k "
      "workload at dp 8)");
  flags->workload.add_to(*cmd);
  flags->topology.add_to(*cmd);
  cmd->add_option("--max-seqlen-per-dp-cp-rank,-M", flags->max_seqlen_per_dp_cp_rank,
                  "token budget M of one micro-batch per DP x CP rank (default: the workload's, "
                  "--seq-length, or the longest sample)");
  cmd->add_option("--global-batch", flags->global_batch,
                  "samples per step (default: the workload's reference batch for this dp, else 32 "
                  "per replica)");
  cmd->add_option("--steps", flags->steps, "global batches to plan")->capture_default_str();
  std::string names = "all";
  for (const auto& n : scheduler_names()) names += ", " + n;
  cmd->add_option("--scheduler", flags->scheduler, "scheduler: " + names)->capture_default_str();
  std::string models;
  for (const auto& n : model_preset_names()) models += (models.empty() ? "" : ", ") + n;
  cmd->add_option("--model", flags->model, "model preset for the cost model and FLOPs: " + models)
      ->capture_default_str();
  cmd->add_option("--cost-linear", flags->cost_linear,
                  "direct cost coefficient per token (with --cost-quadratic instead of --model)");
  cmd->add_option("--cost-quadratic", flags->cost_quadratic,
                  "direct cost coefficient per token squared");
  cmd->add_option("--gpu-tflops", flags->gpu_tflops,
                  "achieved TFLOP/s per GPU, to show modeled step time in ms")
      ->capture_default_str();
  cmd->add_option("--oversize", flags->oversize, "a sample longer than M x cp: error or truncate")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "print the figures as JSON");
  cmd->add_option(
      "--plan-out", flags->plan_out,
      "write the plans (per step, micro-batch and DP replica, the ordered global sample "
      "ids) to this JSON file");
  cmd->add_flag("--no-progress", flags->no_progress, "no progress bar");
  return {cmd, [flags] { return run_plan(*flags); }};
}

}  // namespace thdpack::cli
