// The pipeline's dynamic-CP plan is the one `thdpack plan` computes: plan_global_batch equals
// schedule_dynamic_cp called directly with the CP cost model of the plan command (preset or
// direct coefficients, 400 TFLOP/s, 50 GB/s ring link, 20 us per ring step and layer), and on
// long-tail batches balanced_dynamic_cp does not spread the tokens over many nearly empty
// micro-batches.

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "thdpack/core/topology.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/flops.hpp"

namespace thdpack {
namespace {

// A gathered batch of `count` samples per DP index, lengths lognormal around `median` (the
// longtail workloads' shape), capped at M·dp·cp and padded to 2·dp·cp.
GlobalBatch longtail_batch(std::mt19937_64& rng, int dp, int cp, int64_t m, int64_t count,
                           double median) {
  std::lognormal_distribution<double> length(std::log(median), 1.0);
  const int64_t divisor = 2LL * dp * cp;
  const int64_t cap = m * dp * cp;
  GlobalBatch b;
  for (int d = 0; d < dp; ++d) {
    b.samples_per_rank.push_back(count);
    for (int64_t i = 0; i < count; ++i) {
      const auto l = std::clamp<int64_t>(static_cast<int64_t>(length(rng)), 16, cap);
      b.ids.push_back(static_cast<int64_t>(b.ids.size()) * 3 + 7);
      b.real_lengths.push_back(l);
      b.padded_lengths.push_back(std::min((l + divisor - 1) / divisor * divisor, cap));
    }
  }
  return b;
}

PipelineOptions options_for(int dp, int cp, int64_t m, const std::string& model) {
  PipelineOptions o;
  o.topology = Topology({.tp = 1, .cp = cp, .dp = dp});
  o.max_seqlen_per_dp_cp_rank = m;
  o.scheduler = "balanced_dynamic_cp";
  o.model = model;
  o.cost = model.empty() ? CostModel{6.0, 1.0} : CostModel::from_model(model_preset(model));
  return o;
}

// What `thdpack plan` gives the scheduler for the same job (dynamic_cp_plan.cpp).
ScheduleOptions plan_command_options(const PipelineOptions& o) {
  ScheduleOptions d;
  d.cost = CostModel::megatron_workload();
  d.dp = o.topology.dp();
  d.cp = o.topology.cp();
  d.max_seqlen_per_dp_cp_rank = o.max_seqlen_per_dp_cp_rank;
  d.cost =
      o.model.empty() ? CostModel{} : CostModel::from_model(model_preset(o.model), 400, 2, 50, 20);
  if (o.model.empty()) {
    d.cost.linear = o.cost.linear;
    d.cost.quadratic = o.cost.quadratic;
    d.cost.flops_per_second = 400e12;
  }
  return d;
}

double fill(const Plan& plan, const GlobalBatch& b, const ScheduleOptions& d) {
  const double tokens = std::accumulate(b.real_lengths.begin(), b.real_lengths.end(), 0.0);
  return tokens / (static_cast<double>(plan.num_microbatches()) * d.ranks() *
                   static_cast<double>(d.max_seqlen_per_dp_cp_rank));
}

// 240 batches: 3 layouts x 4 cost models (three presets and direct coefficients) x 20 seeds.
TEST(DynamicCpPipelineCost, PlanEqualsThePlanCommandsSchedule) {
  const std::vector<std::pair<int, int>> layouts = {{2, 2}, {4, 1}, {2, 4}};
  const std::vector<std::string> models = {"llama3-8b", "llama3-70b", "tiny-gpt", ""};
  for (const auto& [dp, cp] : layouts) {
    for (const std::string& model : models) {
      for (uint64_t seed = 0; seed < 20; ++seed) {
        SCOPED_TRACE("dp=" + std::to_string(dp) + " cp=" + std::to_string(cp) + " model='" + model +
                     "' seed=" + std::to_string(seed));
        std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(dp * 10 + cp));
        const PipelineOptions o = options_for(dp, cp, 4096, model);
        const GlobalBatch b =
            longtail_batch(rng, dp, cp, 4096, 8 + static_cast<int64_t>(seed % 5), 1000);
        const Plan direct =
            schedule_balanced_dynamic_cp(b.ids, b.padded_lengths, plan_command_options(o));
        EXPECT_EQ(plan_global_batch(b, o), direct);
      }
    }
  }
}

// The pipeline's options differ from the plan command's only where set: min_cp and the link and
// overhead figures reach the scheduler.
TEST(DynamicCpPipelineCost, OptionsReachTheCostModel) {
  PipelineOptions o = options_for(2, 2, 4096, "llama3-8b");
  o.gpu_tflops = 200;
  o.cp_link_gbps = 25;
  o.cp_step_overhead_us = 5;
  o.min_cp = 2;
  const ScheduleOptions d = schedule_options_of(o);
  const CostModel expected = CostModel::from_model(model_preset("llama3-8b"), 200, 2, 25, 5);
  EXPECT_EQ(d.min_cp, 2);
  EXPECT_DOUBLE_EQ(d.cost.flops_per_second, expected.flops_per_second);
  EXPECT_DOUBLE_EQ(d.cost.link_bytes_per_second, expected.link_bytes_per_second);
  EXPECT_DOUBLE_EQ(d.cost.step_overhead_seconds, expected.step_overhead_seconds);
  EXPECT_DOUBLE_EQ(d.cost.kv_bytes_per_token, expected.kv_bytes_per_token);
  EXPECT_NE(o.describe(), options_for(2, 2, 4096, "llama3-8b").describe());
}

// Long-tail batches (lognormal, median M/4, 64 samples on dp 2 x cp 2 x 2 tp's worth of M = 8192)
// under the llama3-8b model: the tokens need at least K_min = ceil(padded / (dp·cp·M))
// micro-batches. The bound asserted: fill >= 0.5 x the best fill K_min allows, i.e. no more than
// about twice the micro-batches the tokens need. Planning under compute only (no per-step
// overhead) made steps of 7 micro-batches at 24% fill, several times K_min.
TEST(DynamicCpPipelineCost, LongtailFillIsNotPathologicallyLow) {
  const int dp = 2;
  const int cp = 2;
  const int64_t m = 8192;
  double worst = 1.0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed + 1000);
    const PipelineOptions o = options_for(dp, cp, m, "llama3-8b");
    const GlobalBatch b = longtail_batch(rng, dp, cp, m, 32, 2000);
    const ScheduleOptions d = schedule_options_of(o);
    const Plan plan = plan_global_batch(b, o);
    const double padded = std::accumulate(b.padded_lengths.begin(), b.padded_lengths.end(), 0.0);
    const double slots = static_cast<double>(d.ranks()) * static_cast<double>(m);
    const double k_min = std::ceil(padded / slots);
    const double best =
        std::accumulate(b.real_lengths.begin(), b.real_lengths.end(), 0.0) / (k_min * slots);
    const double f = fill(plan, b, d);
    worst = std::min(worst, f / best);
    EXPECT_GE(f, 0.5 * best) << plan.num_microbatches() << " micro-batches, K_min " << k_min;
  }
  RecordProperty("worst_fill_over_best", std::to_string(worst));
}

}  // namespace
}  // namespace thdpack
