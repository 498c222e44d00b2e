// `thdpack run`, started under mpirun: the distributed pipeline for --steps global batches on the
// given layout, every step verified against the single-process reference, with per-step lines and
// a summary of micro-batches, tokens, modeled step time, bytes moved and wall time.

#include <mpi.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "commands/dynamic_cp_plan.hpp"
#include "flags/flag_values.hpp"
#include "flags/job_flags.hpp"
#include "flags/static_shape_flags.hpp"
#include "mpi/mpi_job.hpp"
#include "mpi/rank_agreement.hpp"
#include "reports/progress.hpp"
#include "reports/run_report.hpp"
#include "thdpack/comm/mpi_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/pipeline/step_verification.hpp"
#include "thdpack/schedule/plan_file.hpp"

namespace thdpack::cli {
namespace {

struct RunFlags {
  JobFlags job;
  int64_t steps = 5;
  std::string scheduler = "balanced";
  std::string reading = "megatron";
  std::string cp_mode = "zigzag";
  bool no_verify = false;
  bool no_progress = false;
  double timeout = 300;
  bool json = false;
  std::string report;
  StaticShapeFlags shapes;
  double gpu_tflops = kDefaultGpuTflops;
  DynamicCpFlags dynamic_cp;
  int64_t pad_id = 0;
  int64_t ignore_id = -100;
  bool ignore_masked_labels = false;
  std::string pad_positions = "continue";
  bool tokens_on_last_stage = false;
  std::string plan_in;  ///< a plan file (plan_file.hpp) whose plans the run delivers
};

PipelineOptions pipeline_options(const RunFlags& f, const Job& job) {
  PipelineOptions o;
  o.topology = job.topology;
  o.max_seqlen_per_dp_cp_rank = job.max_seqlen_per_dp_cp_rank;
  o.scheduler = f.scheduler;
  o.cost = job.cost;
  o.model = job.model;
  o.gpu_tflops = f.gpu_tflops;
  o.cp_link_gbps = f.dynamic_cp.link_gbps;
  o.cp_step_overhead_us = f.dynamic_cp.step_overhead_us;
  o.min_cp = f.dynamic_cp.min_cp;
  o.sequence_parallel = f.job.topology.sequence_parallel;
  o.oversize = job.oversize;
  if (f.reading == "all-ranks") {
    o.reading = ReadingMode::kAllRanks;
  } else if (f.reading != "megatron") {
    fail("--reading must be 'megatron' or 'all-ranks', got '", f.reading, "'");
  }
  if (f.cp_mode == "contiguous") {
    o.cp_mode = CpMode::kContiguous;
  } else if (f.cp_mode != "zigzag") {
    fail("--cp-mode must be 'zigzag' or 'contiguous', got '", f.cp_mode, "'");
  }
  o.pad_id = f.pad_id;
  o.ignore_id = f.ignore_id;
  o.ignore_masked_labels = f.ignore_masked_labels;
  if (f.pad_positions == "zero") {
    o.pad_positions = PadPositions::kZero;
  } else if (f.pad_positions != "continue") {
    fail("--pad-positions must be 'continue' or 'zero', got '", f.pad_positions, "'");
  }
  o.tokens_on_last_stage = f.tokens_on_last_stage;
  f.shapes.apply_to(o);
  o.max_sequences_per_pack = job.max_sequences_per_pack;
  return o;
}

// The plans of --plan-in, one per step of the run: step s is the file's step s, planned by the
// run's --scheduler. Throws InvalidArgument when the file has too few steps or no such plan.
std::vector<PlannedBatch> plans_in(const RunFlags& f) {
  std::vector<PlannedBatch> out;
  if (f.plan_in.empty()) return out;
  const std::vector<PlanFileStep> steps = read_plan_file(f.plan_in);
  check(static_cast<int64_t>(steps.size()) >= f.steps, "--plan-in ", f.plan_in, " has ",
        steps.size(), " steps, the run ", f.steps, " (--steps)");
  for (int64_t s = 0; s < f.steps; ++s) {
    const PlanFileStep& step = steps[static_cast<size_t>(s)];
    check(step.step == s, "--plan-in ", f.plan_in, ": its step ", s, " is numbered ", step.step);
    out.push_back(step.plan(f.scheduler));
  }
  return out;
}

// This rank's samples of a step: its DP index's share of the global batch, if it reads.
std::vector<Sample> local_samples(const Dataset& dataset, const Job& job, const Pipeline& pipeline,
                                  int64_t step) {
  if (!pipeline.reads_data()) return {};
  const auto ids = rank_major_indices(global_batch_indices(step, job.global_batch, dataset.size()),
                                      job.topology.dp(), job.sample_order);
  const int64_t per = job.global_batch / job.topology.dp();
  const int64_t d = pipeline.coordinates().dp;
  std::vector<Sample> out;
  out.reserve(static_cast<size_t>(per));
  for (int64_t j = d * per; j < (d + 1) * per; ++j)
    out.push_back(dataset.sample(ids[static_cast<size_t>(j)]));
  return out;
}

// The options that decide which samples each step reads and which collectives run, as every rank
// resolved them (an MPMD launch can give ranks different flags).
std::vector<AgreedOption> agreed_options(const RunFlags& f, const Job& job) {
  const auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value);
    return std::string(text);
  };
  return {{"--global-batch", std::to_string(job.global_batch)},
          {"--steps", std::to_string(f.steps)},
          {"--max-seqlen-per-dp-cp-rank", std::to_string(job.max_seqlen_per_dp_cp_rank)},
          {"the layout", job.topology.describe() +
                             (f.job.topology.sequence_parallel ? " sequence-parallel" : "")},
          {"--scheduler", f.scheduler},
          {"--reading", f.reading},
          {"--cp-mode", f.cp_mode},
          {"--oversize", f.job.oversize},
          {"--no-verify", f.no_verify ? "set" : "not set"},
          {"--sample-order", sample_order_name(job.sample_order)},
          {"--thd-max-packed-sequences", std::to_string(job.max_sequences_per_pack)},
          {"--tail-align", f.shapes.tail_align},
          {"--tail-multiple", std::to_string(f.shapes.tail_multiple)},
          {"--tail-policy", f.shapes.tail_policy},
          {"--fixed-cu-seqlens-entries", std::to_string(f.shapes.fixed_cu_seqlens_entries)},
          {"--pad-id", std::to_string(f.pad_id)},
          {"--ignore-id", std::to_string(f.ignore_id)},
          {"--ignore-masked-labels", f.ignore_masked_labels ? "set" : "not set"},
          {"--pad-positions", f.pad_positions},
          {"--tokens-on-last-stage", f.tokens_on_last_stage ? "set" : "not set"},
          {"--plan-in", f.plan_in},
          {"the cost model",
           number(job.cost.linear) + " x L + " + number(job.cost.quadratic) + " x L^2"},
          {"the dynamic CP cost model", "model " + job.model + ", " + number(f.gpu_tflops) +
                                            " TFLOP/s, " + number(f.dynamic_cp.link_gbps) +
                                            " GB/s, " + number(f.dynamic_cp.step_overhead_us) +
                                            " us, min cp " + std::to_string(f.dynamic_cp.min_cp)},
          {"the data source", job.workload.source.kind + " " + job.workload.source.spec},
          {"the data", dataset_fingerprint(*job.workload.dataset)}};
}

// Resolves the job on this rank and checks it against the other ranks: every rank returns the
// same job, or every rank throws the same error (the first failing rank's, or the first option
// that differs), so no rank is left waiting in a collective its peers never enter.
Job agreed_job(Communicator& world, const RunFlags& f, int rank, int world_size,
               std::vector<PlannedBatch>& plans) {
  std::optional<Job> job;
  RankSetup setup;
  try {
    job.emplace(resolve_job(f.job));
    job->topology.check_world_size(world_size);
    check(job->global_batch % job->topology.dp() == 0, "global batch (", job->global_batch,
          " samples) must be a multiple of dp=", job->topology.dp());
    (void)pipeline_options(f, *job);  // a bad value fails every rank together
    plans = plans_in(f);
    // Rank 0 writes the report: its path is checked against the inputs before the run starts.
    if (rank == 0 && !f.report.empty()) refuse_replacing_inputs(f.report);
    setup.options = agreed_options(f, *job);
  } catch (const InvalidArgument& e) {
    setup.error = e.what();
    setup.code = 2;
  } catch (const Error& e) {
    setup.error = e.what();
    setup.code = 3;
  } catch (const std::exception& e) {
    setup.error = std::string("unexpected error: ") + e.what();
    setup.code = 4;
  }
  agree_across_ranks(world, setup);
  return std::move(*job);
}

int run(const RunFlags& f, int rank, int world_size) {
  MpiCommunicator world(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = f.timeout});
  std::vector<PlannedBatch> plans;
  const Job job = agreed_job(world, f, rank, world_size, plans);
  const PipelineOptions options = pipeline_options(f, job);
  Pipeline pipeline(world, options);
  const Dataset& dataset = *job.workload.dataset;

  RunReport report(world, job, options, f.json);
  report.begin();
  Progress progress("running", f.steps, rank == 0 && !f.no_progress);
  for (int64_t step = 0; step < f.steps; ++step) {
    std::vector<Sample> local;
    try {
      local = local_samples(dataset, job, pipeline, step);
    } catch (const Error& e) {
      pipeline.fail_step(e.what());  // the peers are waiting in this step: every rank stops
    } catch (const std::exception& e) {
      pipeline.fail_step(std::string("unexpected error: ") + e.what());
    }
    const StepResult result =
        plans.empty() ? pipeline.run_step(local)
                      : pipeline.run_planned_step(local, plans[static_cast<size_t>(step)]);
    if (!f.no_verify) {
      verify_step(world, options, result, local,
                  [&dataset](int64_t id) { return dataset.sample(id); });
    }
    report.step(step, result, !f.no_verify);
    progress.advance();
  }
  progress.finish();
  report.finish();
  if (!f.report.empty()) report.write_html(f.report);
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  auto* cmd = app.add_subcommand(
      "run",
      "run the distributed pipeline under mpirun (default: sft-8k, world = tp*cp*dp*pp ranks), "
      "verifying every step against the single-process reference");
  flags->job.add_to(*cmd);
  cmd->add_option("--steps", flags->steps, "global batches to run")
      ->check(positive_integer(kMaxSteps))
      ->capture_default_str();
  cmd->add_option("--scheduler,--sequence-packing-scheduler", flags->scheduler,
                  "balanced, dp_balanced, local, or a dynamic-CP scheduler: default_dynamic_cp "
                  "(Megatron's) or balanced_dynamic_cp (ours); dynamic CP pads to 2*dp*cp")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_option("--gpu-tflops", flags->gpu_tflops,
                  "dynamic CP cost: achieved TFLOP/s per GPU (as thdpack plan)")
      ->check(positive_number(kMaxGpuTflops))
      ->capture_default_str();
  flags->dynamic_cp.add_to(*cmd);
  cmd->add_option("--reading", flags->reading,
                  "megatron (TP-rank 0 of the first and last stage reads and broadcasts) or "
                  "all-ranks (every rank reads, nothing is broadcast)")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_option("--cp-mode", flags->cp_mode, "zigzag or contiguous")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_flag("--no-verify", flags->no_verify, "skip the per-step verification");
  cmd->add_flag("--no-progress", flags->no_progress, "no progress bar (rank 0, stderr)");
  cmd->add_option("--timeout", flags->timeout,
                  "seconds a collective may take before it is reported as failed")
      ->check(positive_number(kMaxTimeoutSeconds))
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "print the summary as JSON (rank 0)");
  cmd->add_option("--report", flags->report,
                  "rank 0 writes a self-contained HTML page with pictures of the run (time per DP "
                  "replica against the bound, bytes against the minimum, wall time per step)")
      ->check(non_empty());
  flags->shapes.add_to(*cmd);
  cmd->add_option("--pad-id", flags->pad_id, "token id of padding positions")
      ->check(any_integer())
      ->capture_default_str();
  cmd->add_option("--ignore-id", flags->ignore_id, "label of positions without a target")
      ->check(any_integer())
      ->capture_default_str();
  cmd->add_flag("--ignore-masked-labels", flags->ignore_masked_labels,
                "labels are the --ignore-id wherever the loss mask is 0 (masked prompts), so that "
                "a loss with ignore_index alone skips them");
  cmd->add_option("--pad-positions", flags->pad_positions,
                  "position ids of padding: continue (count on, as Megatron) or zero")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_flag("--tokens-on-last-stage", flags->tokens_on_last_stage,
                "the last pipeline stage also gets tokens and position ids (multi-token "
                "prediction)");
  cmd->add_option("--plan-in", flags->plan_in,
                  "deliver the plans of this plan file (`thdpack plan --plan-out`; step s is its "
                  "step s, the plan of --scheduler) instead of planning; each is checked against "
                  "the step first")
      ->check(non_empty());
  return {cmd, [flags] {
            return run_mpi_job(MPI_THREAD_FUNNELED, flags->timeout,
                               [&](int rank, int size) { return run(*flags, rank, size); });
          }};
}

}  // namespace thdpack::cli
