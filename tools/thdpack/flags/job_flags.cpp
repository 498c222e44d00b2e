#include "flags/job_flags.hpp"

#include <algorithm>

#include "flags/flag_values.hpp"
#include "reports/progress.hpp"
#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/workloads.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::cli {
namespace {

// M when neither the flag nor the workload gives one: the longest sample, rounded up so that one
// sample fills at most one pack.
// Every length is read: a large dataset shows a progress bar saying why (none within a second).
int64_t default_cap(const Dataset& dataset, int cp, int64_t divisor) {
  // Beyond this the scan takes hours (a mock config's size can be anything up to 2^63).
  constexpr int64_t kMaxScanned = 10'000'000'000;
  check(dataset.size() <= kMaxScanned, "finding the longest of ", dataset.size(),
        " samples would take hours: give -M/--max-seqlen-per-dp-cp-rank (at most ", kMaxScanned,
        " samples are scanned for it)");
  int64_t longest = 0;
  constexpr int64_t kChunk = 1 << 20;
  Progress bar("finding the longest sample (give -M to skip)", dataset.size(), true);
  for (int64_t i = 0; i < dataset.size(); ++i) {
    longest = std::max(longest, dataset.length(i));
    if ((i + 1) % kChunk == 0) bar.advance(kChunk);
  }
  bar.finish();
  const int64_t capacity = round_up(longest, divisor);
  return capacity / cp + (capacity % cp != 0);
}

// Largest direct cost coefficient a flag takes (model presets give about 1e11 per token).
constexpr double kMaxCostCoefficient = 1e20;

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void JobFlags::add_to(CLI::App& cmd) {
  workload.add_to(cmd);
  topology.add_to(cmd);
  cmd.add_option("--max-seqlen-per-dp-cp-rank,-M", max_seqlen_per_dp_cp_rank,
                 "token budget M of one micro-batch per DP x CP rank (default: the workload's, "
                 "--seq-length, or the longest sample)")
      ->check(positive_integer());
  cmd.add_option("--global-batch,--global-batch-size", global_batch,
                 "samples per step (default: the workload's reference batch for this dp, else 32 "
                 "per replica)")
      ->check(positive_integer());
  model_flag =
      cmd.add_option("--model", model,
                     "model preset for the cost model and FLOPs: " + joined(model_preset_names()))
          ->check(non_empty())
          ->capture_default_str();
  cmd.add_option("--cost-linear", cost_linear,
                 "direct cost coefficient per token (with --cost-quadratic instead of --model)")
      ->check(non_negative_number(kMaxCostCoefficient));
  cmd.add_option("--cost-quadratic", cost_quadratic, "direct cost coefficient per token squared")
      ->check(non_negative_number(kMaxCostCoefficient));
  cmd.add_option("--oversize", oversize, "a sample longer than M x cp: error or truncate")
      ->check(non_empty())
      ->capture_default_str();
  cmd.add_option(
         "--sample-order", sample_order,
         "which DP rank holds which sample of a global batch: contiguous (rank r holds a "
         "block) or megatron (rank r holds samples k*dp + r, as MegatronPretrainingSampler)")
      ->check(non_empty())
      ->capture_default_str();
  cmd.add_option("--thd-max-packed-sequences", max_sequences_per_pack,
                 "if > 0, at most this many samples in one pack (0: no cap)")
      ->check(non_negative_integer())
      ->capture_default_str();
}

GlobalBatchOptions Job::batch_options() const {
  GlobalBatchOptions o;
  o.global_batch = global_batch;
  o.dp = topology.dp();
  o.divisor = divisor;
  o.capacity = capacity();
  o.oversize = oversize;
  o.order = sample_order;
  return o;
}

Job resolve_job(const JobFlags& f) {
  Job job;
  job.workload = resolve_workload(f.workload);
  const ResolvedWorkload& w = job.workload;
  job.topology = f.topology.resolve(w.cp.value_or(1));
  job.divisor = padding_divisor({.cp = job.topology.cp(),
                                 .tp = job.topology.tp(),
                                 .sequence_parallel = f.topology.sequence_parallel});
  job.max_seqlen_per_dp_cp_rank = f.max_seqlen_per_dp_cp_rank > 0 ? f.max_seqlen_per_dp_cp_rank
                                  : w.max_seqlen_per_dp_cp_rank
                                      ? *w.max_seqlen_per_dp_cp_rank
                                      : default_cap(*w.dataset, job.topology.cp(), job.divisor);
  job.global_batch = f.global_batch > 0 ? f.global_batch
                     : w.workload_name
                         ? default_global_batch(workload(*w.workload_name), job.topology.dp())
                         : int64_t{32} * job.topology.dp();
  checked_mul(job.max_seqlen_per_dp_cp_rank, job.topology.cp(), "the capacity M x cp");
  if (f.cost_linear >= 0 || f.cost_quadratic >= 0) {
    if (f.model_flag != nullptr && f.model_flag->count() > 0) {
      throw InvalidArgument(
          "--model and --cost-linear/--cost-quadratic both set the cost model; give one of them");
    }
    job.cost =
        CostModel::from_coefficients(std::max(f.cost_linear, 0.0), std::max(f.cost_quadratic, 0.0));
  } else {
    job.model = f.model;
    job.cost = CostModel::from_model(model_preset(f.model));
  }
  if (f.oversize == "truncate") {
    job.oversize = OversizePolicy::kTruncate;
  } else if (f.oversize != "error") {
    fail("--oversize must be 'error' or 'truncate', got '", f.oversize, "'");
  }
  job.sample_order = parse_sample_order(f.sample_order);
  job.max_sequences_per_pack = f.max_sequences_per_pack;
  return job;
}

}  // namespace thdpack::cli
