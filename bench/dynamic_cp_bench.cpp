// Dynamic CP (BENCHMARKS.md figure 12): modeled step / lower bound of dp_balanced at fixed CP,
// Megatron's default_dynamic_cp and balanced_dynamic_cp, under Megatron's L²/c workload and under
// the full CP cost model, on the long-context workloads at dp·cp = 32 and 256. Medians over seeds;
// every plan is checked against the dynamic-CP contracts.
// Then planning time: both dynamic-CP schedulers timed on every one of many seeded inputs from
// four length distributions at dp·cp = 32 and 256 (p50 / p90 / max), and on batches of 4,095,
// 16,384, 131,072 and 1,048,576 samples of each distribution on 256 ranks (--large-samples; two
// inputs each, under each cost model: the search's work depends on it) and of 16,383 samples on
// 1,024 ranks (the most planned whole there), and of samples that all have M tokens, with the
// worst modeled step over bound of the plans timed. 4,095 is the largest
// batch balanced_dynamic_cp plans whole on 256 ranks (from 4,096 it plans a template of 2,048),
// the slowest size below a million.
//
//   thdpack_dynamic_cp_bench [--seeds N] [--timing-seeds N] [--large-samples N[,N...]]
//                            [--samples-per-rank N[,N...]] [--quick] [--out FILE.json]
//
// --samples-per-rank (default 8) sets the quality rows' batches: N samples per rank of the dp·cp
// group, one set of rows per N, so that quality is read at batches of hundreds of micro-batches
// too (where the first micro-batch count that packs leaves the plans far from the bound).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/workloads.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/flops.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

struct Case {
  std::string workload;
  int ranks;  // dp·cp
};

std::vector<int64_t> raw_lengths(const Workload& w, int64_t n, uint64_t seed) {
  MockConfig c = w.dataset;
  c.size = std::max<int64_t>(n, 1);
  c.seed = seed;
  const auto ds = make_mock_dataset(c);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = ds->length(i);
  return out;
}

std::vector<int64_t> padded(const std::vector<int64_t>& lengths, int64_t divisor) {
  std::vector<int64_t> out(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) out[i] = round_up(lengths[i], divisor);
  return out;
}

/// dp_balanced at a fixed CP size under the same cost.
double fixed_cp_step(const std::vector<int64_t>& lengths, int dp, int cp, int64_t m,
                     const CostModel& cost) {
  std::vector<int64_t> ids(lengths.size());
  std::iota(ids.begin(), ids.end(), 0);
  ScheduleOptions o;
  o.dp = dp;
  o.cp = cp;
  o.max_seqlen_per_dp_cp_rank = m;
  const Plan plan = make_scheduler("dp_balanced")->schedule({ids, lengths, {}, {}}, o);
  return fixed_cp_modeled_step(plan, ids, lengths, cp, cost);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The q-quantile of `v` by nearest rank: the smallest value with at least q of them at or below
/// it (so the p50 of two inputs is the lower, not the larger).
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

/// Seeded inputs per distribution at the large batch size.
constexpr uint64_t kLargeSeeds = 2;

/// The name of the timing input whose samples all have M tokens.
const std::string kFixedLength = "fixed-M";

/// A length distribution for the timing runs, at its own M.
struct TimingCase {
  std::string workload;
  int64_t max_seqlen_per_dp_cp_rank;
};

/// This process's CPU time in milliseconds (unlike wall time, not inflated by other processes on
/// a shared machine; it would count any thread a scheduler started).
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct PlanTimes {
  std::vector<double> wall_ms;
  std::vector<double> cpu_ms;
  double worst_step_over_bound = 0;  ///< the plans' modeled step / lower bound, the largest
};

/// Wall and CPU milliseconds `scheduler` takes on each of the inputs; every plan is checked.
PlanTimes plan_times(const std::string& scheduler, const std::vector<std::vector<int64_t>>& inputs,
                     const ScheduleOptions& o) {
  PlanTimes times;
  for (const auto& lengths : inputs) {
    std::vector<int64_t> ids(lengths.size());
    std::iota(ids.begin(), ids.end(), 0);
    const double c0 = process_cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    const Plan plan = make_scheduler(scheduler)->schedule({ids, lengths, {}, {}}, o);
    const auto t1 = std::chrono::steady_clock::now();
    times.cpu_ms.push_back(process_cpu_ms() - c0);
    times.wall_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    check_dynamic_cp_plan(plan, ids, lengths, o);
    const PlanStats stats = evaluate_dynamic_cp_plan(plan, ids, lengths, o, o.cost);
    times.worst_step_over_bound =
        std::max(times.worst_step_over_bound, stats.step_cost / stats.step_lower_bound);
  }
  return times;
}

/// Planning time of both dynamic-CP schedulers: many seeded inputs per distribution and size
/// (8 samples per rank) under the last of `costs`, then kLargeSeeds inputs of each size in
/// `large_samples` of each distribution on 256 ranks under each of `costs`.
nlohmann::json timing_rows(int seeds, const std::vector<int64_t>& large_samples,
                           const std::vector<std::pair<std::string, CostModel>>& costs) {
  const std::vector<TimingCase> cases = {
      {"longctx-128k", 16384}, {"rl-64k", 16384}, {"longtail-32k", 8192}, {"bimodal-16k", 4096}};
  const std::vector<std::string> schedulers = {"default_dynamic_cp", "balanced_dynamic_cp"};
  nlohmann::json rows = nlohmann::json::array();
  std::printf("\n%-13s %5s %8s %8s %7s %21s %11s %11s %11s %11s %11s %10s\n", "workload", "dp*cp",
              "M", "samples", "cost", "scheduler", "p50 ms", "p90 ms", "max ms", "cpu p50",
              "cpu max", "step/bnd");
  auto add_row = [&](const std::string& name, int ranks, int64_t m, int64_t n,
                     const std::string& cost_name, const std::string& scheduler,
                     const PlanTimes& t) {
    const auto& ms = t.wall_ms;
    const double p50 = quantile(ms, 0.5), p90 = quantile(ms, 0.9), max = quantile(ms, 1.0);
    const double cpu50 = quantile(t.cpu_ms, 0.5), cpu_max = quantile(t.cpu_ms, 1.0);
    std::printf("%-13s %5d %8lld %8lld %7s %21s %11.3f %11.3f %11.3f %11.3f %11.3f %10.4f\n",
                name.c_str(), ranks, static_cast<long long>(m), static_cast<long long>(n),
                cost_name.c_str(), scheduler.c_str(), p50, p90, max, cpu50, cpu_max,
                t.worst_step_over_bound);
    rows.push_back({{"workload", name},
                    {"ranks", ranks},
                    {"max_seqlen_per_dp_cp_rank", m},
                    {"samples", n},
                    {"cost", cost_name},
                    {"scheduler", scheduler},
                    {"inputs", ms.size()},
                    {"p50_ms", p50},
                    {"p90_ms", p90},
                    {"max_ms", max},
                    {"cpu_p50_ms", cpu50},
                    {"cpu_max_ms", cpu_max},
                    {"worst_step_over_bound", t.worst_step_over_bound}});
  };
  auto options = [&](int ranks, int64_t m, const CostModel& cost) {
    ScheduleOptions o;
    o.cost = CostModel::megatron_workload();
    o.dp = ranks;
    o.max_seqlen_per_dp_cp_rank = m;
    o.cost = cost;
    return o;
  };
  const auto& [main_cost_name, main_cost] = costs.back();
  for (const int ranks : {32, 256}) {
    for (const TimingCase& c : seeds > 0 ? cases : std::vector<TimingCase>{}) {  // 0: large only
      const int64_t n = 8LL * ranks;
      std::vector<std::vector<int64_t>> inputs;
      for (int s = 0; s < seeds; ++s) {
        inputs.push_back(padded(
            raw_lengths(workload(c.workload), n, 5000 + static_cast<uint64_t>(s)), 2LL * ranks));
      }
      for (const auto& scheduler : schedulers) {
        add_row(
            c.workload, ranks, c.max_seqlen_per_dp_cp_rank, n, main_cost_name, scheduler,
            plan_times(scheduler, inputs, options(ranks, c.max_seqlen_per_dp_cp_rank, main_cost)));
      }
    }
  }
  // The large batch: kLargeSeeds inputs of each distribution (the time depends on the input),
  // and one of samples that each fill a rank (a fixed sequence length of M: one group per sample,
  // the most groups a batch of n samples makes); on 256 ranks, and the largest batch planned
  // whole on 1,024 ranks (below twice the template's 8·1,024 samples).
  std::vector<TimingCase> large_cases = cases;
  large_cases.push_back({kFixedLength, 16384});
  std::vector<std::pair<int64_t, int>> large_runs;
  for (const int64_t n : large_samples) large_runs.emplace_back(n, 256);
  if (!large_samples.empty()) large_runs.emplace_back(2 * 8 * 1024 - 1, 1024);
  for (const auto& [n, ranks] : large_runs) {
    for (const TimingCase& c : large_cases) {
      std::vector<std::vector<int64_t>> inputs;
      if (c.workload == kFixedLength) {
        inputs.emplace_back(static_cast<size_t>(n), c.max_seqlen_per_dp_cp_rank);
      }
      for (uint64_t s = 0; s < kLargeSeeds && c.workload != kFixedLength; ++s) {
        inputs.push_back(padded(raw_lengths(workload(c.workload), n, 77 + s), 2LL * ranks));
      }
      for (const auto& [cost_name, cost] : costs) {
        for (const auto& scheduler : schedulers) {
          add_row(c.workload, ranks, c.max_seqlen_per_dp_cp_rank, n, cost_name, scheduler,
                  plan_times(scheduler, inputs, options(ranks, c.max_seqlen_per_dp_cp_rank, cost)));
        }
      }
    }
  }
  return rows;
}

int run(int argc, char** argv) {
  int seeds = 9;
  int timing_seeds = 50;
  std::vector<int64_t> large_samples = {4095, 16384, 131072, 1 << 20};
  std::vector<int64_t> samples_per_rank = {8};
  auto read_list = [](const char* text) {
    std::vector<int64_t> values;
    std::stringstream list(text);
    for (std::string n; std::getline(list, n, ',');) values.push_back(std::stoll(n));
    return values;
  };
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc) {
      seeds = std::stoi(argv[++i]);
    } else if (a == "--timing-seeds" && i + 1 < argc) {
      timing_seeds = std::stoi(argv[++i]);
    } else if (a == "--large-samples" && i + 1 < argc) {
      large_samples = read_list(argv[++i]);
      std::erase(large_samples, 0);
    } else if (a == "--samples-per-rank" && i + 1 < argc) {
      samples_per_rank = read_list(argv[++i]);
    } else if (a == "--quick") {
      seeds = 1;
      timing_seeds = 1;
      large_samples.clear();
    } else if (a == "--out" && i + 1 < argc) {
      out_path = argv[++i];
    } else {
      std::cerr << "usage: thdpack_dynamic_cp_bench [--seeds N] [--timing-seeds N] "
                   "[--large-samples N[,N...]] [--samples-per-rank N[,N...]] [--quick] "
                   "[--out FILE.json]\n";
      return 2;
    }
  }
  const ModelSpec model = model_preset("llama3-8b");
  const std::vector<std::pair<std::string, CostModel>> costs = {
      {"L^2/cp", CostModel::megatron_workload()},
      {"full", CostModel::from_model(model, kDefaultGpuTflops, 2, kDefaultCpLinkGBps,
                                     kDefaultCpStepOverheadUs)}};
  const std::vector<Case> cases = {
      {"longctx-128k", 32}, {"longctx-128k", 256}, {"rl-64k", 32}, {"rl-64k", 256}};
  const std::vector<std::string> schedulers = {"dp_balanced", "default_dynamic_cp",
                                               "balanced_dynamic_cp"};

  nlohmann::json rows = nlohmann::json::array();
  std::printf("%-13s %5s %8s %13s %19s %20s %9s %12s %9s\n", "workload", "dp*cp", "cost",
              "dp_balanced", "default_dynamic_cp", "balanced_dynamic_cp", "speedup",
              "plan ms (ours)", "max ms");
  for (const int64_t per_rank : seeds > 0 ? samples_per_rank : std::vector<int64_t>{})
    for (const Case& c : cases) {  // --seeds 0: timing only
      const Workload w = workload(c.workload);
      const int fixed_cp = w.cp;
      const int64_t m = w.max_seqlen_per_dp_cp_rank;
      const int64_t n = per_rank * c.ranks;
      for (const auto& [cost_name, cost] : costs) {
        std::vector<std::vector<double>> ratio(3);
        std::vector<double> plan_ms;
        for (int s = 0; s < seeds; ++s) {
          const auto raw = raw_lengths(w, n, 1000 + static_cast<uint64_t>(s));
          ScheduleOptions o;
          o.cost = CostModel::megatron_workload();
          o.dp = c.ranks;
          o.cp = 1;
          o.max_seqlen_per_dp_cp_rank = m;
          o.cost = cost;
          const auto lengths = padded(raw, 2LL * c.ranks);
          std::vector<int64_t> ids(lengths.size());
          std::iota(ids.begin(), ids.end(), 0);
          const PlanStats reference =
              evaluate_dynamic_cp_plan(Plan(o.dp, o.cp), ids, lengths, o, cost);
          const double bound = reference.step_lower_bound;
          ratio[0].push_back(
              fixed_cp_step(padded(raw, 2LL * fixed_cp), c.ranks / fixed_cp, fixed_cp, m, cost) /
              bound);
          for (size_t k = 1; k < 3; ++k) {
            const auto t0 = std::chrono::steady_clock::now();
            const Plan plan = make_scheduler(schedulers[k])->schedule({ids, lengths, {}, {}}, o);
            const auto t1 = std::chrono::steady_clock::now();
            if (k == 2)
              plan_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            check_dynamic_cp_plan(plan, ids, lengths, o);
            ratio[k].push_back(evaluate_dynamic_cp_plan(plan, ids, lengths, o, cost).step_cost /
                               bound);
          }
        }
        const double r0 = median(ratio[0]), r1 = median(ratio[1]), r2 = median(ratio[2]);
        const double slowest_plan_ms = *std::max_element(plan_ms.begin(), plan_ms.end());
        std::printf("%-13s %5d %8s %12.4fx %18.4fx %19.4fx %8.3fx %12.2f %9.2f\n",
                    c.workload.c_str(), c.ranks, cost_name.c_str(), r0, r1, r2, r1 / r2,
                    median(plan_ms), slowest_plan_ms);
        rows.push_back({{"workload", c.workload},
                        {"ranks", c.ranks},
                        {"fixed_cp", fixed_cp},
                        {"samples", n},
                        {"cost", cost_name},
                        {"dp_balanced", r0},
                        {"default_dynamic_cp", r1},
                        {"balanced_dynamic_cp", r2},
                        {"plan_ms", median(plan_ms)},
                        {"plan_ms_max", slowest_plan_ms},
                        {"seeds", seeds}});
      }
    }
  const nlohmann::json timing = timing_rows(timing_seeds, large_samples, costs);
  if (!out_path.empty()) {
    std::ofstream(out_path) << nlohmann::json{{"dynamic_cp", rows}, {"timing", timing}}.dump(2)
                            << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace thdpack

int main(int argc, char** argv) {
  return thdpack::run(argc, argv);
}
