// Quality benchmarks (BENCHMARKS.md figures 1, 2, 3, 6 and 7), seeded and deterministic:
//   1. modeled step time vs the lower bound, per scheduler and workload, at dp 8 and dp 64
//   2. micro-batches per step vs ceil(L2/dp) and the token bound
//   3. packing fill of best-fit decreasing vs first-fit decreasing and the L1/L2 bounds
//   6. hard-constraint violations over 10,000 random cases
//   7. CP balance of per-sample zigzag vs whole-pack zigzag, and padding overhead
// Prints tables and writes every figure to a JSON file (--out) for bench/report.py.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_workloads.hpp"
#include "naive_baseline.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/packing/cp_partition.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/plan_stats.hpp"

namespace thdpack::bench {
namespace {

using nlohmann::json;

struct Settings {
  int64_t steps = 20;
  int64_t random_cases = 10'000;
  std::vector<int64_t> fill_sizes = {10'000, 100'000, 1'000'000};
  std::string out = "quality.json";
};

const std::vector<std::string> kWorkloads = {"sft-8k", "longtail-32k", "uniform-16k", "bimodal-16k",
                                             "rl-64k"};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Figure 1 and 2: every scheduler (and the naive baseline) on every workload at dp 8 and 64.
json step_time_figures(const Settings& s) {
  json rows = json::array();
  std::printf("\n[1,2] modeled step time / lower bound, micro-batches (mean over %lld steps)\n",
              static_cast<long long>(s.steps));
  std::printf("%-13s %4s %-12s %9s %9s %9s %8s %8s %9s\n", "workload", "dp", "scheduler", "ratio",
              "max", "tight", "mb", "mb bound", "vs dp_bal");
  for (const auto& name : kWorkloads) {
    for (int dp : {8, 64}) {
      const int64_t batch = default_global_batch(workload(name), dp);
      struct Series {
        std::string name;
        std::vector<double> ratio{}, tight{}, mb{}, bound{}, cost{};
      };
      std::vector<Series> series = {{"balanced"}, {"dp_balanced"}, {"local"}, {"naive_ffd_lpt"}};
      for (int64_t step = 0; step < s.steps; ++step) {
        const BenchBatch b = workload_batch(name, dp, batch, step);
        const ScheduleInput input = b.input();
        for (auto& ser : series) {
          const Plan plan = ser.name == "naive_ffd_lpt"
                                ? naive_ffd_lpt(input, b.options)
                                : make_scheduler(ser.name)->schedule(input, b.options);
          validate_plan(plan, input, b.options);
          const PlanStats st = evaluate_plan(plan, input, b.batch.real_lengths, b.options);
          ser.ratio.push_back(st.step_ratio);
          ser.tight.push_back(st.step_cost / st.step_tight_bound);
          ser.mb.push_back(static_cast<double>(st.num_microbatches));
          ser.bound.push_back(static_cast<double>(st.microbatch_lower_bound));
          ser.cost.push_back(st.step_cost);
        }
      }
      const double reference = mean(series[1].cost);
      for (const auto& ser : series) {
        const double speedup = reference / mean(ser.cost);
        const double worst = *std::max_element(ser.ratio.begin(), ser.ratio.end());
        std::printf("%-13s %4d %-12s %8.4fx %8.4fx %8.4fx %8.2f %8.2f %8.3fx\n", name.c_str(), dp,
                    ser.name.c_str(), mean(ser.ratio), worst, mean(ser.tight), mean(ser.mb),
                    mean(ser.bound), speedup);
        rows.push_back({{"workload", name},
                        {"dp", dp},
                        {"global_batch", batch},
                        {"scheduler", ser.name},
                        {"ratio_mean", mean(ser.ratio)},
                        {"ratio_max", worst},
                        {"tight_ratio_mean", mean(ser.tight)},
                        {"microbatches_mean", mean(ser.mb)},
                        {"microbatch_bound_mean", mean(ser.bound)},
                        {"speedup_vs_dp_balanced", speedup}});
      }
    }
  }
  return rows;
}

// Figure 3: offline packing fill against the bounds.
json fill_figures(const Settings& s) {
  json rows = json::array();
  std::printf("\n[3] packing: packs used vs bounds (fill = tokens / (packs x C))\n");
  std::printf("%-13s %9s %7s %9s %9s %9s %9s %8s %8s\n", "workload", "n", "C", "L1", "L2", "FFD",
              "BFD", "BFD fill", "vs L2");
  for (const std::string name : {"sft-8k", "longtail-32k", "uniform-16k", "bimodal-16k"}) {
    const int64_t capacity = workload(name).max_seqlen_per_dp_cp_rank;
    for (int64_t n : s.fill_sizes) {
      const auto lengths = workload_lengths(name, n);
      double tokens = 0;
      for (int64_t l : lengths) tokens += static_cast<double>(l);
      const int64_t l1 = bins_lower_bound_l1(lengths, capacity);
      const int64_t l2 = bins_lower_bound_l2(lengths, capacity);
      const int64_t ffd = first_fit_decreasing(lengths, capacity).count();
      const int64_t bfd = best_fit_decreasing(lengths, capacity).count();
      const double fill = tokens / (static_cast<double>(bfd) * static_cast<double>(capacity));
      const double over_l2 = static_cast<double>(bfd) / static_cast<double>(l2) - 1.0;
      std::printf("%-13s %9lld %7lld %9lld %9lld %9lld %9lld %7.3f%% %7.3f%%\n", name.c_str(),
                  static_cast<long long>(n), static_cast<long long>(capacity),
                  static_cast<long long>(l1), static_cast<long long>(l2),
                  static_cast<long long>(ffd), static_cast<long long>(bfd), 100 * fill,
                  100 * over_l2);
      rows.push_back({{"workload", name},
                      {"n", n},
                      {"capacity", capacity},
                      {"l1", l1},
                      {"l2", l2},
                      {"ffd", ffd},
                      {"bfd", bfd},
                      {"bfd_fill", fill},
                      {"bfd_over_l2", over_l2}});
    }
  }
  return rows;
}

// Figure 6: contracts of every scheduler over random cases.
json violation_figures(const Settings& s) {
  json rows = json::array();
  std::printf("\n[6] hard constraints over %lld random cases\n",
              static_cast<long long>(s.random_cases));
  for (const auto& name : scheduler_names(CpLayout::kFixed)) {
    const auto scheduler = make_scheduler(name);
    int64_t planned = 0, rejected = 0, violations = 0;
    for (int64_t seed = 0; seed < s.random_cases; ++seed) {
      std::mt19937_64 rng(static_cast<uint64_t>(seed));
      const int dp = std::uniform_int_distribution<int>(1, 32)(rng);
      const int multiple = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 4 : 1;
      const int64_t capacity = std::uniform_int_distribution<int64_t>(256, 65536)(rng);
      const int per_rank = std::uniform_int_distribution<int>(multiple, 64)(rng);
      std::lognormal_distribution<double> dist(std::log(static_cast<double>(capacity) / 8), 1.2);
      std::vector<int64_t> ids, lengths;
      for (int i = 0; i < dp * per_rank; ++i) {
        ids.push_back(i);
        lengths.push_back(std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), 1, capacity));
      }
      ScheduleOptions o;
      o.dp = dp;
      o.microbatch_multiple = multiple;
      o.max_seqlen_per_dp_cp_rank = capacity;
      o.cost = bench_cost();
      const ScheduleInput input{ids, lengths, {}, {}};
      try {
        const Plan plan = scheduler->schedule(input, o);
        ++planned;
        try {
          validate_plan(plan, input, o);
        } catch (const InternalError&) {
          ++violations;
        }
      } catch (const InvalidArgument&) {
        ++rejected;  // documented: too few samples for dp x K non-empty packs
      }
    }
    std::printf("%-12s planned %lld, rejected (too few samples) %lld, violations %lld\n",
                name.c_str(), static_cast<long long>(planned), static_cast<long long>(rejected),
                static_cast<long long>(violations));
    rows.push_back({{"scheduler", name},
                    {"cases", s.random_cases},
                    {"planned", planned},
                    {"rejected", rejected},
                    {"violations", violations}});
  }
  return rows;
}

// Figure 7: causal attention work per CP rank on mixed packs of workload samples.
json cp_figures() {
  json rows = json::array();
  std::printf("\n[7] CP balance on mixed packs (max/mean causal work across CP ranks)\n");
  std::printf("%-13s %3s %6s %10s %12s %10s %12s %9s\n", "workload", "cp", "packs", "zigzag",
              "zigzag/pack", "whole", "whole/pack", "padding");
  for (const std::string name : {"longtail-32k", "rl-64k", "uniform-16k"}) {
    for (int cp : {2, 4, 8}) {
      Workload w = workload(name);
      const auto dataset = make_mock_dataset(w.dataset);
      const int64_t divisor = padding_divisor({.cp = cp});
      const int64_t capacity = w.max_seqlen_per_dp_cp_rank * cp;
      std::vector<int64_t> real;
      std::vector<int64_t> padded;
      for (int64_t i = 0; static_cast<int64_t>(real.size()) < 4096; ++i) {
        const int64_t len = dataset->length(i);
        if (round_up(len, divisor) > capacity) continue;
        real.push_back(len);
        padded.push_back(round_up(len, divisor));
      }
      const Bins packs = best_fit_decreasing(padded, capacity);
      double worst_zigzag = 0, worst_whole = 0, sum_zigzag = 0, sum_whole = 0;
      // Work-weighted: a micro-batch takes as long as its slowest CP rank, so the step-level
      // figure is sum over packs of the max rank work / sum of the mean rank work.
      double step_zigzag = 0, step_whole = 0, step_mean = 0;
      double real_tokens = 0, padded_tokens = 0;
      for (int64_t p = 0; p < packs.count(); ++p) {
        std::vector<int32_t> cu{0}, cu_padded{0};
        for (int64_t item : packs.bin(p)) {
          cu.push_back(cu.back() + static_cast<int32_t>(real[static_cast<size_t>(item)]));
          cu_padded.push_back(cu_padded.back() +
                              static_cast<int32_t>(padded[static_cast<size_t>(item)]));
          real_tokens += static_cast<double>(real[static_cast<size_t>(item)]);
          padded_tokens += static_cast<double>(padded[static_cast<size_t>(item)]);
        }
        const ThdLayout layout(cu, cu_padded);
        const auto work = cp_attention_work(layout, cp);
        const double zigzag = *std::max_element(work.begin(), work.end()) / mean(work);
        // Whole-pack zigzag: the pack sliced as if it were one sequence.
        const std::vector<int32_t> one{0, cu_padded.back()};
        const ThdLayout as_one(one, one);
        std::vector<double> whole;
        for (int r = 0; r < cp; ++r) {
          const auto rows_of_rank = as_one.cp_rows(cp, r, CpMode::kZigzag);
          whole.push_back(causal_attention_work(layout, rows_of_rank));
        }
        const double whole_ratio = *std::max_element(whole.begin(), whole.end()) / mean(whole);
        step_zigzag += *std::max_element(work.begin(), work.end());
        step_whole += *std::max_element(whole.begin(), whole.end());
        step_mean += mean(work);
        worst_zigzag = std::max(worst_zigzag, zigzag);
        worst_whole = std::max(worst_whole, whole_ratio);
        sum_zigzag += zigzag;
        sum_whole += whole_ratio;
      }
      const double count = static_cast<double>(packs.count());
      const double padding = (padded_tokens - real_tokens) / real_tokens;
      std::printf("%-13s %3d %6lld %9.4fx %5.3f/%-5.3f %9.4fx %5.3f/%-5.3f %8.3f%%\n", name.c_str(),
                  cp, static_cast<long long>(packs.count()), step_zigzag / step_mean,
                  sum_zigzag / count, worst_zigzag, step_whole / step_mean, sum_whole / count,
                  worst_whole, 100 * padding);
      rows.push_back({{"workload", name},
                      {"cp", cp},
                      {"packs", packs.count()},
                      {"zigzag_step", step_zigzag / step_mean},
                      {"whole_pack_step", step_whole / step_mean},
                      {"zigzag_mean", sum_zigzag / count},
                      {"zigzag_max", worst_zigzag},
                      {"whole_pack_mean", sum_whole / count},
                      {"whole_pack_max", worst_whole},
                      {"padding_overhead", padding}});
    }
  }
  std::printf("(zigzag, whole: work-weighted over all packs; x/pack: mean/max over packs)\n");
  return rows;
}

}  // namespace
}  // namespace thdpack::bench

int main(int argc, char** argv) {
  using namespace thdpack::bench;
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      s.out = argv[++i];
    } else if (a == "--quick") {
      s.steps = 3;
      s.random_cases = 500;
      s.fill_sizes = {10'000};
    } else {
      std::cerr << "usage: thdpack_quality_bench [--out FILE] [--quick]\n";
      return 2;
    }
  }
  nlohmann::json out;
  out["steps"] = s.steps;
  out["step_time"] = step_time_figures(s);
  out["fill"] = fill_figures(s);
  out["violations"] = violation_figures(s);
  out["cp_balance"] = cp_figures();
  std::ofstream(s.out) << out.dump(2) << '\n';
  std::printf("\nwrote %s\n", s.out.c_str());
  return 0;
}
