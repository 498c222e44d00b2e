// The balanced scheduler's modeled step time on the named workloads (BENCHMARKS.md figure 1):
// within 1.02x of the lower bound at dp 8 and dp 64, and never slower than dp_balanced.

#include <gtest/gtest.h>

#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/workloads.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

class BalancedOnWorkload : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(BalancedOnWorkload, WithinTwoPercentOfTheBound) {
  const auto& [name, dp] = GetParam();
  const Workload w = workload(name);
  const auto dataset = make_mock_dataset(w.dataset);
  const ScheduleOptions options =
      ScheduleOptions::from_topology(Topology({.cp = w.cp, .dp = dp}), w.max_seqlen_per_dp_cp_rank,
                                     CostModel::from_model(model_preset("llama3-8b")));
  GlobalBatchOptions b;
  b.global_batch = default_global_batch(w, dp);
  b.dp = dp;
  b.divisor = padding_divisor({.cp = w.cp});
  b.capacity = options.capacity();
  const auto balanced = make_scheduler("balanced");
  const auto megatron = make_scheduler("dp_balanced");
  for (int64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const GlobalBatch batch = make_global_batch(*dataset, step, b);
    const ScheduleInput input{batch.ids, batch.padded_lengths, batch.samples_per_rank, {}};
    const PlanStats ours =
        evaluate_plan(balanced->schedule(input, options), input, batch.real_lengths, options);
    const PlanStats theirs =
        evaluate_plan(megatron->schedule(input, options), input, batch.real_lengths, options);
    EXPECT_LE(ours.step_cost, ours.step_lower_bound * 1.02);
    EXPECT_LE(ours.step_cost, theirs.step_cost);
    EXPECT_LE(ours.num_microbatches, ours.microbatch_lower_bound + 1);
    EXPECT_EQ(ours.cap_violations, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(NamedWorkloads, BalancedOnWorkload,
                         ::testing::Combine(::testing::Values("sft-8k", "longtail-32k",
                                                              "uniform-16k", "bimodal-16k",
                                                              "rl-64k"),
                                            ::testing::Values(8, 64)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_dp" +
                                           std::to_string(std::get<1>(info.param));
                           for (auto& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace thdpack
