#include "reports/run_report.hpp"

#include <cstdio>
#include <iostream>
#include <unordered_map>

#include "reports/json_output.hpp"
#include "reports/run_html_report.hpp"
#include "reports/table.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/plan_stats.hpp"

namespace thdpack::cli {
namespace {

std::string megabytes(double bytes) {
  return fixed(bytes / 1e6, 2) + " MB";
}

double mean_of(const std::vector<RunStepFigures>& steps, double (*field)(const RunStepFigures&)) {
  double sum = 0;
  for (const auto& s : steps) sum += field(s);
  return steps.empty() ? 0 : sum / static_cast<double>(steps.size());
}

/// Each replica's modeled time over the step's lower bound.
std::vector<double> over_bound(const PlanStats& stats) {
  std::vector<double> out;
  for (double c : stats.replica_step_costs)
    out.push_back(stats.step_lower_bound > 0 ? c / stats.step_lower_bound : 0);
  return out;
}

}  // namespace

// Dynamic CP: the plan's modeled step (micro-batches meet, each lasting as long as its slowest
// group) and dp_balanced's at the fixed cp, both under the scheduler's cost and over the same
// lower bound; fill is real tokens over K·dp·cp·M.
void RunReport::dynamic_cp_figures(const StepResult& r, RunStepFigures& f) const {
  const ScheduleOptions o = schedule_options_of(options_);
  const PlanStats stats =
      evaluate_dynamic_cp_plan(r.plan, r.batch.ids, r.batch.padded_lengths, o, o.cost);
  f.step_ratio = stats.step_lower_bound > 0 ? stats.step_cost / stats.step_lower_bound : 0;
  const double slots = static_cast<double>(stats.num_microbatches) * o.ranks() *
                       static_cast<double>(o.max_seqlen_per_dp_cp_rank);
  f.fill = slots > 0 ? r.sums.s1_real / slots : 0;
  try {
    const ScheduleOptions so = schedule_options_of(options_);
    const ScheduleInput input{r.batch.ids, r.batch.padded_lengths, r.batch.samples_per_rank, {}};
    const Plan megatron = make_scheduler("dp_balanced")->schedule(input, so);
    const double step = fixed_cp_modeled_step(megatron, r.batch.ids, r.batch.padded_lengths,
                                              options_.topology.cp(), o.cost);
    f.dp_balanced_ratio = stats.step_lower_bound > 0 ? step / stats.step_lower_bound : 0;
  } catch (const InvalidArgument&) {
    f.dp_balanced_ratio = 0;  // a sample longer than M·cp: no fixed-CP plan
  }
}

RunReport::RunReport(Communicator& world, const Job& job, const PipelineOptions& options, bool json)
    : world_(world), job_(job), options_(options), json_(json) {}

void RunReport::begin() {
  if (world_.rank() != 0 || json_) return;
  std::cout << "workload   " << job_.workload.name << ": " << job_.workload.description << '\n'
            << "layout     " << options_.topology.describe() << ", " << world_.size()
            << " MPI ranks\n"
            << "packs      M=" << options_.max_seqlen_per_dp_cp_rank << ", capacity "
            << pack_options_of(options_).capacity << ", padding divisor "
            << pack_options_of(options_).divisor << ", scheduler " << options_.scheduler
            << ", reading "
            << (options_.reading == ReadingMode::kMegatron ? "megatron" : "all-ranks") << '\n'
            << "batch      " << job_.global_batch << " samples per step\n\n";
  std::printf("%5s %5s %8s %9s %7s %10s %11s %12s %8s %10s %6s %9s %s\n", "step", "mb", "samples",
              "tokens", "fill", "step/bnd", "dp_bal/bnd", "exchange", "vs min", "bcast", "colls",
              "wall ms", "check");
}

void RunReport::step(int64_t step, const StepResult& r, bool verified) {
  std::vector<int64_t> sums = {r.traffic.exchange_bytes, r.traffic.broadcast_bytes};
  world_.allreduce(sums, ReduceOp::kSum);
  std::vector<double> maxima = {static_cast<double>(r.traffic.bytes_sent),
                                static_cast<double>(r.traffic.collectives), r.traffic.seconds};
  world_.allreduce(maxima, ReduceOp::kMax);

  RunStepFigures f;
  f.step = step;
  f.microbatches = r.num_microbatches();
  f.samples = static_cast<int64_t>(r.batch.ids.size());
  f.real_tokens = r.sums.s1_real;
  f.exchange_bytes = sums[0];
  f.broadcast_bytes = sums[1];
  f.bytes_per_rank_max = static_cast<int64_t>(maxima[0]);
  f.collectives_max = static_cast<int64_t>(maxima[1]);
  f.seconds_max = maxima[2];
  f.verified = verified;
  if (world_.rank() == 0 && r.dynamic_cp) {
    dynamic_cp_figures(r, f);
    f.exchange_minimum = minimum_exchange_bytes(r, options_);
  } else if (world_.rank() == 0) {
    const ScheduleOptions so = schedule_options_of(options_);
    const ScheduleInput input{r.batch.ids, r.batch.padded_lengths, r.batch.samples_per_rank, {}};
    const PlanStats stats = evaluate_plan(r.plan, input, r.batch.real_lengths, so);
    f.fill = stats.fill;
    f.step_ratio = stats.step_ratio;
    f.replica_over_bound = over_bound(stats);
    try {
      const Plan megatron = make_scheduler("dp_balanced")->schedule(input, so);
      const PlanStats megatron_stats = evaluate_plan(megatron, input, r.batch.real_lengths, so);
      f.dp_balanced_ratio = megatron_stats.step_ratio;
      f.dp_balanced_replica_over_bound = over_bound(megatron_stats);
    } catch (const InvalidArgument&) {
      f.dp_balanced_ratio = 0;
    }
    f.exchange_minimum = minimum_exchange_bytes(r, options_);
  }
  if (world_.rank() == 0) {
    if (!json_) {
      const double ratio = f.exchange_minimum > 0 ? static_cast<double>(f.exchange_bytes) /
                                                        static_cast<double>(f.exchange_minimum)
                                                  : 1.0;
      std::printf("%5lld %5lld %8lld %9s %6.1f%% %9.4fx %10s %12s %7.3fx %10s %6lld %9.2f %s\n",
                  static_cast<long long>(step), static_cast<long long>(f.microbatches),
                  static_cast<long long>(f.samples), scaled(f.real_tokens).c_str(), 100 * f.fill,
                  f.step_ratio,
                  f.dp_balanced_ratio > 0 ? (fixed(f.dp_balanced_ratio, 4) + "x").c_str() : "-",
                  megabytes(static_cast<double>(f.exchange_bytes)).c_str(), ratio,
                  megabytes(static_cast<double>(f.broadcast_bytes)).c_str(),
                  static_cast<long long>(f.collectives_max), 1e3 * f.seconds_max,
                  verified ? "verified" : "-");
      std::fflush(stdout);
    }
  }
  steps_.push_back(f);
}

void RunReport::finish() {
  if (world_.rank() != 0) return;
  double tokens = 0, seconds = 0, exchange = 0, minimum = 0;
  int64_t collectives = 0, bytes_max = 0;
  bool all_verified = true;
  for (const auto& s : steps_) {
    tokens += s.real_tokens;
    seconds += s.seconds_max;
    exchange += static_cast<double>(s.exchange_bytes);
    minimum += static_cast<double>(s.exchange_minimum);
    collectives = std::max(collectives, s.collectives_max);
    bytes_max = std::max(bytes_max, s.bytes_per_rank_max);
    all_verified = all_verified && s.verified;
  }
  const double per_million = tokens > 0 ? seconds / tokens * 1e6 : 0;
  const double exchange_ratio = minimum > 0 ? exchange / minimum : 1.0;
  const double mean_ratio = mean_of(steps_, [](const RunStepFigures& s) { return s.step_ratio; });
  const double mean_megatron =
      mean_of(steps_, [](const RunStepFigures& s) { return s.dp_balanced_ratio; });
  if (json_) {
    nlohmann::json j;
    j["steps"] = steps_.size();
    j["ranks"] = world_.size();
    j["topology"] = options_.topology.describe();
    j["scheduler"] = options_.scheduler;
    j["all_verified"] = all_verified;
    j["seconds_per_step_mean"] = seconds / static_cast<double>(steps_.size());
    j["seconds_per_million_tokens"] = per_million;
    j["exchange_bytes_vs_minimum"] = exchange_ratio;
    j["bytes_per_rank_max"] = bytes_max;
    j["collectives_per_step_max"] = collectives;
    j["step_ratio_mean"] = mean_ratio;
    j["dp_balanced_step_ratio_mean"] = mean_megatron;
    nlohmann::json per = nlohmann::json::array();
    for (const auto& s : steps_) {
      per.push_back({{"step", s.step},
                     {"microbatches", s.microbatches},
                     {"real_tokens", s.real_tokens},
                     {"fill", s.fill},
                     {"step_ratio", s.step_ratio},
                     {"dp_balanced_ratio", s.dp_balanced_ratio},
                     {"exchange_bytes", s.exchange_bytes},
                     {"exchange_minimum", s.exchange_minimum},
                     {"broadcast_bytes", s.broadcast_bytes},
                     {"collectives_max", s.collectives_max},
                     {"seconds_max", s.seconds_max},
                     {"verified", s.verified}});
    }
    j["per_step"] = per;
    std::cout << json_text(j, 2) << '\n';
    return;
  }
  std::cout << "\nsummary    " << steps_.size() << " steps, "
            << (all_verified ? "all verified" : "not verified") << "; wall "
            << fixed(1e3 * seconds / static_cast<double>(steps_.size()), 2) << " ms/step ("
            << fixed(per_million, 3) << " s per 1M tokens)\n"
            << "traffic    exchange " << fixed(exchange_ratio, 3)
            << "x the minimum (each moved token once, CP slices only); at most "
            << megabytes(static_cast<double>(bytes_max)) << " sent by one rank in a step; at most "
            << collectives << " collectives per step\n"
            << "balance    modeled step " << fixed(mean_ratio, 4) << "x the lower bound with "
            << options_.scheduler;
  if (mean_megatron > 0) std::cout << " (dp_balanced: " << fixed(mean_megatron, 4) << "x)";
  std::cout << '\n';
}

void RunReport::write_html(const std::string& path) const {
  if (world_.rank() != 0) return;
  write_run_html_report(
      path, {{{"workload", job_.workload.name + ": " + job_.workload.description},
              {"layout",
               options_.topology.describe() + ", " + std::to_string(world_.size()) + " MPI ranks"},
              {"packs", "M=" + std::to_string(options_.max_seqlen_per_dp_cp_rank) + ", capacity " +
                            std::to_string(job_.capacity()) + ", padding divisor " +
                            std::to_string(job_.divisor)},
              {"reading", options_.reading == ReadingMode::kMegatron ? "megatron" : "all-ranks"},
              {"batch", std::to_string(job_.global_batch) + " samples per step"}},
             options_.scheduler,
             steps_});
}

}  // namespace thdpack::cli
