// `thdpack run`, started under mpirun: the distributed pipeline for --steps global batches on the
// given layout, every step verified against the single-process reference, with per-step lines and
// a summary of micro-batches, tokens, modeled step time, bytes moved and wall time.

#include <mpi.h>

#include "commands.hpp"
#include "job_flags.hpp"
#include "mpi_job.hpp"
#include "run_report.hpp"
#include "thdpack/comm/mpi_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/pipeline/step_verification.hpp"

namespace thdpack::cli {
namespace {

struct RunFlags {
  JobFlags job;
  int64_t steps = 5;
  std::string scheduler = "balanced";
  std::string reading = "megatron";
  std::string cp_mode = "zigzag";
  bool no_verify = false;
  double timeout = 300;
  bool json = false;
  std::string tail_align = "none";
  int64_t tail_multiple = 0;
  std::string tail_policy = "append_dummy_seq";
  int64_t fixed_cu_seqlens_entries = 0;
};

PipelineOptions pipeline_options(const RunFlags& f, const Job& job) {
  PipelineOptions o;
  o.topology = job.topology;
  o.max_seqlen_per_dp_cp_rank = job.max_seqlen_per_dp_cp_rank;
  o.scheduler = f.scheduler;
  o.cost = job.cost;
  o.sequence_parallel = f.job.topology.sequence_parallel;
  o.oversize = job.oversize;
  if (f.reading == "all-ranks") {
    o.reading = ReadingMode::kAllRanks;
  } else if (f.reading != "megatron") {
    throw InvalidArgument("--reading must be 'megatron' or 'all-ranks', got '" + f.reading + "'");
  }
  if (f.cp_mode == "contiguous") {
    o.cp_mode = CpMode::kContiguous;
  } else if (f.cp_mode != "zigzag") {
    throw InvalidArgument("--cp-mode must be 'zigzag' or 'contiguous', got '" + f.cp_mode + "'");
  }
  if (f.tail_multiple < 0 || f.fixed_cu_seqlens_entries < 0) {
    throw InvalidArgument("--tail-multiple and --fixed-cu-seqlens-entries must be >= 0");
  }
  o.tail_align = parse_tail_align(f.tail_align);
  if (f.tail_multiple > 0 && o.tail_align != TailAlign::kMultiple) {
    throw InvalidArgument("--tail-multiple " + std::to_string(f.tail_multiple) +
                          " needs --tail-align multiple");
  }
  o.tail_multiple = f.tail_multiple;
  o.tail_policy = parse_tail_policy(f.tail_policy);
  o.fixed_cu_seqlens_entries = f.fixed_cu_seqlens_entries;
  o.max_sequences_per_pack = job.max_sequences_per_pack;
  return o;
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

int run(const RunFlags& f, int rank, int world_size) {
  if (f.steps < 1) throw InvalidArgument("--steps must be >= 1");
  MpiCommunicator world(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = f.timeout});
  const Job job = resolve_job(f.job);
  job.topology.check_world_size(world_size);
  if (job.global_batch % job.topology.dp() != 0) {
    throw InvalidArgument(
        "global batch (" + std::to_string(job.global_batch) +
        " samples) must be a multiple of dp=" + std::to_string(job.topology.dp()));
  }
  const PipelineOptions options = pipeline_options(f, job);
  Pipeline pipeline(world, options);
  const Dataset& dataset = *job.workload.dataset;

  RunReport report(world, job, options, f.json);
  report.begin();
  for (int64_t step = 0; step < f.steps; ++step) {
    const std::vector<Sample> local = local_samples(dataset, job, pipeline, step);
    const StepResult result = pipeline.run_step(local);
    if (!f.no_verify) {
      verify_step(world, options, result, local,
                  [&dataset](int64_t id) { return dataset.sample(id); });
    }
    report.step(step, result, !f.no_verify);
  }
  report.finish();
  (void)rank;
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
  cmd->add_option("--steps", flags->steps, "global batches to run")->capture_default_str();
  cmd->add_option("--scheduler,--sequence-packing-scheduler", flags->scheduler,
                  "balanced, dp_balanced or local")
      ->capture_default_str();
  cmd->add_option("--reading", flags->reading,
                  "megatron (TP-rank 0 of the first and last stage reads and broadcasts) or "
                  "all-ranks (every rank reads, nothing is broadcast)")
      ->capture_default_str();
  cmd->add_option("--cp-mode", flags->cp_mode, "zigzag or contiguous")->capture_default_str();
  cmd->add_flag("--no-verify", flags->no_verify, "skip the per-step verification");
  cmd->add_option("--timeout", flags->timeout,
                  "seconds a collective may take before it is reported as failed")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "print the summary as JSON (rank 0)");
  cmd->add_option("--tail-align", flags->tail_align,
                  "static shapes (CUDA graphs): none, multiple (rows of every pack rounded up to "
                  "--tail-multiple) or capacity (every pack M x cp rows)")
      ->capture_default_str();
  cmd->add_option("--tail-multiple", flags->tail_multiple,
                  "N for --tail-align multiple (a multiple of the padding divisor)");
  cmd->add_option("--tail-policy", flags->tail_policy,
                  "where tail rows go: append_dummy_seq (an all-padding sequence of real length "
                  "0) or extend_last (the last padded boundary moves)")
      ->capture_default_str();
  cmd->add_option("--fixed-cu-seqlens-entries", flags->fixed_cu_seqlens_entries,
                  "if > 0, every cu_seqlens array has exactly this many entries (last repeated)");
  return {cmd, [flags] {
            return run_mpi_job(MPI_THREAD_FUNNELED,
                               [&](int rank, int size) { return run(*flags, rank, size); });
          }};
}

}  // namespace thdpack::cli
