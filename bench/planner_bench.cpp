// The planner's worst case (BENCHMARKS.md figure 5, over many inputs): `balanced` timed on every
// input of a case, not on one, with dp_balanced and a plain LPT + first-fit baseline on the same
// inputs in the same process.
//
// Cases: 8192 samples x dp 64 and 32768 x dp 256 over seeded inputs from several length
// distributions (named workloads, a chat-like mix, a clipped RL mix, a tight case whose token
// bound is exactly K·dp·C, many equal lengths); then ~1M samples per step as dp grows. For each
// case: planning time p50 / p90 / max (and the input that gave the max), the worst time over its
// distribution's median, quality (step cost / tight lower bound: median and max; never worse than
// the baseline), micro-batches against ceil(L2/dp), and peak heap bytes per sample while planning.
//
//   thdpack_planner_bench [--seeds N] [--large-seeds N] [--dps 8,64,1024] [--quick] [--out F.json]
//   thdpack_planner_bench --input DISTRIBUTION:SEED:SAMPLES:DP [--repeat R]   (one input, e.g. to
//                                                                               profile the
//                                                                               slowest)

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_workloads.hpp"
#include "naive_baseline.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

// Peak heap use while planning: every allocation of this process is counted.
namespace {
std::atomic<int64_t> g_heap_now{0};
std::atomic<int64_t> g_heap_peak{0};

void* counted_alloc(std::size_t n) {
  void* p = std::malloc(n + 16);
  if (p == nullptr) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n;
  const int64_t now = g_heap_now += static_cast<int64_t>(n);
  int64_t peak = g_heap_peak.load();
  while (now > peak && !g_heap_peak.compare_exchange_weak(peak, now)) {
  }
  return static_cast<char*>(p) + 16;
}
void counted_free(void* p) {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - 16;
  g_heap_now -= static_cast<int64_t>(*reinterpret_cast<std::size_t*>(base));
  std::free(base);
}
}  // namespace

void* operator new(std::size_t n) {
  return counted_alloc(n);
}
void* operator new[](std::size_t n) {
  return counted_alloc(n);
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  counted_free(p);
}

namespace thdpack::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Lengths = std::vector<int64_t>;

// The setting: cap C = 32768 per DP rank (cp 1), cost 24576·L + L².
constexpr int64_t kCapacity = 32768;

int64_t clamp_length(double x) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::llround(x)), 1, kCapacity);
}

// A length distribution: n lengths from a seed.
struct Distribution {
  std::string name;
  std::function<Lengths(int64_t n, uint64_t seed)> draw;
};

// A named workload's length distribution, drawn with `seed`, clipped at the cap.
Lengths from_workload(const std::string& workload, int64_t n, uint64_t seed) {
  Lengths out = workload_lengths(workload, n, seed);
  for (int64_t& l : out) l = std::min(l, kCapacity);
  return out;
}

std::vector<Distribution> distributions() {
  std::vector<Distribution> d;
  for (const char* w : {"sft-8k", "longtail-32k", "uniform-16k", "bimodal-16k"}) {
    d.push_back({w, [w](int64_t n, uint64_t seed) { return from_workload(w, n, seed); }});
  }
  // Chat-like SFT: thousands of 100-600 token turns, a lognormal tail up to the cap.
  d.push_back({"chat-mix", [](int64_t n, uint64_t seed) {
                 std::mt19937_64 rng(seed * 7919 + 1);
                 std::uniform_int_distribution<int64_t> turn(100, 600);
                 std::lognormal_distribution<double> tail(std::log(3000.0), 1.2);
                 std::bernoulli_distribution is_tail(0.08);
                 Lengths out(static_cast<size_t>(n));
                 for (int64_t& l : out) l = is_tail(rng) ? clamp_length(tail(rng)) : turn(rng);
                 return out;
               }});
  // RL rollouts clipped at the cap: a third of them hit it.
  d.push_back({"rl-clipped", [](int64_t n, uint64_t seed) {
                 std::mt19937_64 rng(seed * 104729 + 3);
                 std::lognormal_distribution<double> len(std::log(16000.0), 0.9);
                 Lengths out(static_cast<size_t>(n));
                 for (int64_t& l : out) l = clamp_length(len(rng));
                 return out;
               }});
  // Tight: the lengths fill whole packs exactly (each pack of C cut at random points), so the
  // token bound is exactly the pack count.
  d.push_back({"tight", [](int64_t n, uint64_t seed) {
                 std::mt19937_64 rng(seed * 15485863 + 5);
                 Lengths out;
                 out.reserve(static_cast<size_t>(n));
                 std::uniform_int_distribution<int> pieces(2, 12);
                 while (static_cast<int64_t>(out.size()) < n) {
                   const int p = pieces(rng);
                   std::vector<int64_t> cuts{0, kCapacity};
                   std::uniform_int_distribution<int64_t> at(1, kCapacity - 1);
                   for (int i = 1; i < p; ++i) cuts.push_back(at(rng));
                   std::sort(cuts.begin(), cuts.end());
                   for (size_t i = 1; i < cuts.size() && static_cast<int64_t>(out.size()) < n;
                        ++i) {
                     if (cuts[i] > cuts[i - 1]) out.push_back(cuts[i] - cuts[i - 1]);
                   }
                 }
                 std::shuffle(out.begin(), out.end(), rng);
                 return out;
               }});
  // Many equal lengths: a few fixed sizes (fixed-length pretraining chunks with some halves).
  d.push_back({"equal-lengths", [](int64_t n, uint64_t seed) {
                 std::mt19937_64 rng(seed * 32452843 + 7);
                 const int64_t sizes[] = {4096, 4096, 4096, 2048, 8192, 1024};
                 std::uniform_int_distribution<int> pick(0, 5);
                 Lengths out(static_cast<size_t>(n));
                 for (int64_t& l : out) l = sizes[pick(rng)];
                 return out;
               }});
  return d;
}

struct Run {
  double ms = 0;
  double quality = 0;           // step cost / tight bound
  double baseline_quality = 0;  // the same for plain LPT + first fit
  int64_t k = 0;
  int64_t k_bound = 0;  // ceil(L2 / dp)
  double heap_bytes_per_sample = 0;
  double dp_balanced_ms = 0;
  bool feasible = true;
};

Run run_one(const Lengths& lengths, int dp, bool with_baselines) {
  std::vector<int64_t> ids(lengths.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  ScheduleInput input{ids, lengths, {}, {}};
  ScheduleOptions options;
  options.dp = dp;
  options.max_seqlen_per_dp_cp_rank = kCapacity;
  options.cost = CostModel::from_coefficients(24576, 1);

  Run run;
  const auto balanced = make_scheduler("balanced");
  const int64_t heap_before = g_heap_now.load();
  g_heap_peak = heap_before;
  const auto t0 = Clock::now();
  Plan plan;
  try {
    plan = balanced->schedule(input, options);
  } catch (const InvalidArgument&) {
    run.feasible = false;
    return run;
  }
  run.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  run.heap_bytes_per_sample =
      static_cast<double>(g_heap_peak.load() - heap_before) / static_cast<double>(lengths.size());
  validate_plan(plan, input, options);
  const PlanStats stats = evaluate_plan(plan, input, {}, options);
  run.quality = stats.step_cost / stats.step_tight_bound;
  run.k = plan.num_microbatches();
  run.k_bound = stats.microbatch_lower_bound;
  if (with_baselines) {
    const auto t1 = Clock::now();
    const Plan dpb = make_scheduler("dp_balanced")->schedule(input, options);
    run.dp_balanced_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
    const Plan naive = naive_ffd_lpt(input, options);
    run.baseline_quality =
        evaluate_plan(naive, input, {}, options).step_cost / stats.step_tight_bound;
  }
  return run;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const auto hi = static_cast<size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

nlohmann::json run_case(const std::string& label, int64_t n, int dp, int seeds, bool baselines) {
  std::vector<double> all_ms, quality, dpb_ms, heap;
  double worst_over_median = 0, worst_quality_vs_baseline = 0;
  int64_t k_over_bound = 0, infeasible = 0;
  std::string worst_input;
  double worst_ms = -1;
  nlohmann::json per_distribution = nlohmann::json::object();
  for (const Distribution& d : distributions()) {
    std::vector<double> ms;
    for (int s = 0; s < seeds; ++s) {
      const Lengths lengths = d.draw(n, static_cast<uint64_t>(s));
      const Run r = run_one(lengths, dp, baselines);
      if (!r.feasible) {
        ++infeasible;
        continue;
      }
      ms.push_back(r.ms);
      all_ms.push_back(r.ms);
      quality.push_back(r.quality);
      heap.push_back(r.heap_bytes_per_sample);
      if (baselines) {
        dpb_ms.push_back(r.dp_balanced_ms);
        worst_quality_vs_baseline =
            std::max(worst_quality_vs_baseline, r.quality / r.baseline_quality);
      }
      k_over_bound = std::max(k_over_bound, r.k - r.k_bound);
      if (r.ms > worst_ms) {
        worst_ms = r.ms;
        worst_input = d.name + " seed " + std::to_string(s);
      }
    }
    const double median = percentile(ms, 0.5);
    const double max = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
    // Over a median of at least 3 inputs; with fewer the ratio says nothing.
    if (ms.size() >= 3) worst_over_median = std::max(worst_over_median, max / median);
    per_distribution[d.name] = {{"inputs", ms.size()}, {"p50_ms", median}, {"max_ms", max}};
  }
  nlohmann::json j = {
      {"case", label},
      {"samples", n},
      {"dp", dp},
      {"inputs", all_ms.size()},
      {"infeasible_inputs", infeasible},
      {"p50_ms", percentile(all_ms, 0.5)},
      {"p90_ms", percentile(all_ms, 0.9)},
      {"max_ms", all_ms.empty() ? 0 : *std::max_element(all_ms.begin(), all_ms.end())},
      {"slowest_input", worst_input},
      {"max_over_distribution_median", worst_over_median},
      {"quality_p50", percentile(quality, 0.5)},
      {"quality_max", quality.empty() ? 0 : *std::max_element(quality.begin(), quality.end())},
      {"max_k_over_bound", k_over_bound},
      {"heap_bytes_per_sample_max", heap.empty() ? 0 : *std::max_element(heap.begin(), heap.end())},
      {"per_distribution", per_distribution}};
  if (baselines) {
    j["dp_balanced_p50_ms"] = percentile(dpb_ms, 0.5);
    j["dp_balanced_max_ms"] = dpb_ms.empty() ? 0 : *std::max_element(dpb_ms.begin(), dpb_ms.end());
    j["worst_quality_over_lpt_first_fit"] = worst_quality_vs_baseline;
  }
  return j;
}

void print_row(const nlohmann::json& j) {
  std::printf(
      "%-34s %6zu  p50 %9.2f  p90 %9.2f  max %9.2f ms  max/median %6.2f  quality p50 "
      "%.5f max %.5f  K-bound <= %lld  heap %.0f B/sample  slowest: %s\n",
      j["case"].get<std::string>().c_str(), j["inputs"].get<size_t>(), j["p50_ms"].get<double>(),
      j["p90_ms"].get<double>(), j["max_ms"].get<double>(),
      j["max_over_distribution_median"].get<double>(), j["quality_p50"].get<double>(),
      j["quality_max"].get<double>(), static_cast<long long>(j["max_k_over_bound"].get<int64_t>()),
      j["heap_bytes_per_sample_max"].get<double>(), j["slowest_input"].get<std::string>().c_str());
  if (j.contains("dp_balanced_p50_ms")) {
    std::printf(
        "%-34s        dp_balanced p50 %.2f max %.2f ms; worst quality / LPT+first-fit "
        "%.5f\n",
        "", j["dp_balanced_p50_ms"].get<double>(), j["dp_balanced_max_ms"].get<double>(),
        j["worst_quality_over_lpt_first_fit"].get<double>());
  }
  std::fflush(stdout);
}

// --input NAME:SEED:SAMPLES:DP: times that one input `repeat` times.
int run_input(const std::string& spec, int repeat) {
  std::vector<std::string> parts;
  for (size_t p = 0; p <= spec.size();) {
    const size_t e = std::min(spec.find(':', p), spec.size());
    parts.push_back(spec.substr(p, e - p));
    p = e + 1;
  }
  if (parts.size() != 4) throw InvalidArgument("--input wants DISTRIBUTION:SEED:SAMPLES:DP");
  for (const Distribution& d : distributions()) {
    if (d.name != parts[0]) continue;
    const Lengths lengths = d.draw(std::stoll(parts[2]), std::stoull(parts[1]));
    for (int r = 0; r < repeat; ++r) {
      const Run run = run_one(lengths, std::stoi(parts[3]), /*with_baselines=*/r == 0);
      std::printf(
          "%s: %.3f ms, quality %.6f (LPT+first-fit %.6f), K %lld (bound %lld), heap %.0f "
          "B/sample\n",
          spec.c_str(), run.ms, run.quality, run.baseline_quality, static_cast<long long>(run.k),
          static_cast<long long>(run.k_bound), run.heap_bytes_per_sample);
    }
    return 0;
  }
  throw InvalidArgument("unknown distribution '" + parts[0] + "'");
}

int main_impl(int argc, char** argv) {
  int seeds = 30;  // per distribution: 8 distributions x 30 = 240 inputs per case
  int large_seeds = 2;
  std::vector<int> large_dps = {8, 64, 1024, 4096, 16384};
  int64_t large_n = 1 << 20;
  std::string out, one_input;
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--seeds") {
      seeds = std::stoi(next());
    } else if (a == "--large-seeds") {
      large_seeds = std::stoi(next());
    } else if (a == "--large-samples") {
      large_n = std::stoll(next());
    } else if (a == "--dps") {
      large_dps.clear();
      std::string list = next();
      for (size_t p = 0; p < list.size();) {
        const size_t e = list.find(',', p);
        large_dps.push_back(std::stoi(list.substr(p, e - p)));
        p = e == std::string::npos ? list.size() : e + 1;
      }
    } else if (a == "--quick") {
      seeds = 2;
      large_seeds = 1;
      large_n = 1 << 16;
      large_dps = {8, 64};
    } else if (a == "--out") {
      out = next();
    } else if (a == "--input") {
      one_input = next();
    } else if (a == "--repeat") {
      repeat = std::stoi(next());
    } else {
      throw InvalidArgument("unknown argument " + a +
                            "; use --seeds N --large-seeds N --large-samples N --dps a,b "
                            "--quick --out FILE");
    }
  }
  if (!one_input.empty()) return run_input(one_input, repeat);
  nlohmann::json results = nlohmann::json::array();
  for (auto [n, dp] : {std::pair<int64_t, int>{8192, 64}, {32768, 256}}) {
    results.push_back(run_case(std::to_string(n) + " x dp " + std::to_string(dp), n, dp, seeds,
                               /*baselines=*/true));
    print_row(results.back());
  }
  for (int dp : large_dps) {
    results.push_back(run_case(std::to_string(large_n) + " x dp " + std::to_string(dp), large_n, dp,
                               large_seeds, /*baselines=*/true));
    print_row(results.back());
  }
  if (!out.empty()) std::ofstream(out) << results.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace thdpack::bench

int main(int argc, char** argv) {
  try {
    return thdpack::bench::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "thdpack_planner_bench: " << e.what() << "\n";
    return 2;
  }
}
