// Speed benchmarks (BENCHMARKS.md figures 4, 5 and 9), single thread, inputs in memory:
//   packer    best-fit decreasing (ours) vs first-fit decreasing, 10k and 1M lengths
//   balancer  the balanced scheduler at 8192 samples x dp 64 and 32768 x dp 256 (dp_balanced
//   alongside) pack      building tokens/labels/loss_mask/position_ids/padding_mask for 1M tokens
//   vs memcpy
// Run with --benchmark_repetitions and report medians.

#include <benchmark/benchmark.h>

#include <cstring>

#include "bench_workloads.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::bench {
namespace {

constexpr int64_t kPackerCapacity = 32768;

const std::vector<int64_t>& packer_lengths(int64_t n) {
  static std::vector<int64_t> small = workload_lengths("longtail-32k", 10'000);
  static std::vector<int64_t> large = workload_lengths("longtail-32k", 1'000'000);
  return n <= 10'000 ? small : large;
}

void BM_PackerBestFitDecreasing(benchmark::State& state) {
  const auto& lengths = packer_lengths(state.range(0));
  for (auto _ : state) {
    Bins bins = best_fit_decreasing(lengths, kPackerCapacity);
    benchmark::DoNotOptimize(bins.items.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_PackerBestFitDecreasing)->Arg(10'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

void BM_PackerFirstFitDecreasing(benchmark::State& state) {
  const auto& lengths = packer_lengths(state.range(0));
  for (auto _ : state) {
    Bins bins = first_fit_decreasing(lengths, kPackerCapacity);
    benchmark::DoNotOptimize(bins.items.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_PackerFirstFitDecreasing)->Arg(10'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

void run_scheduler(benchmark::State& state, const char* name) {
  const int dp = static_cast<int>(state.range(1));
  const BenchBatch b = workload_batch("longtail-32k", dp, state.range(0), 0);
  const auto scheduler = make_scheduler(name);
  const ScheduleInput input = b.input();
  for (auto _ : state) {
    Plan plan = scheduler->schedule(input, b.options);
    benchmark::DoNotOptimize(plan.all_ids().data());
  }
}

void BM_BalancerBalanced(benchmark::State& state) {
  run_scheduler(state, "balanced");
}
BENCHMARK(BM_BalancerBalanced)->Args({8192, 64})->Args({32768, 256})->Unit(benchmark::kMillisecond);

void BM_BalancerDpBalanced(benchmark::State& state) {
  run_scheduler(state, "dp_balanced");
}
BENCHMARK(BM_BalancerDpBalanced)
    ->Args({8192, 64})
    ->Args({32768, 256})
    ->Unit(benchmark::kMillisecond);

// ~1M tokens of sft-8k samples.
struct PackInput {
  std::vector<Sample> samples;
  std::vector<SampleView> views;
  int64_t tokens = 0;
};

const PackInput& pack_input() {
  static const PackInput input = [] {
    PackInput in;
    const auto dataset = make_mock_dataset(workload("longtail-32k").dataset);
    for (int64_t i = 0; in.tokens < 1'000'000; ++i) {
      in.samples.push_back(dataset->sample(i));
      in.tokens += static_cast<int64_t>(in.samples.back().input_ids.size());
    }
    for (const auto& s : in.samples) in.views.push_back(view_of(s));
    return in;
  }();
  return input;
}

// Bytes the packer writes per token: tokens, labels, position ids (8 each), loss mask (4), padding
// mask (1).
constexpr int64_t kPackedBytesPerToken = 8 + 8 + 8 + 4 + 1;

void BM_PackOneMillionTokens(benchmark::State& state) {
  const PackInput& in = pack_input();
  PackOptions options;
  for (auto _ : state) {
    PackedBatch p = pack_samples(in.views, options);
    benchmark::DoNotOptimize(p.tokens.data());
  }
  state.SetBytesProcessed(state.iterations() * in.tokens * kPackedBytesPerToken);
}
BENCHMARK(BM_PackOneMillionTokens)->Unit(benchmark::kMillisecond);

void BM_MemcpySameBytes(benchmark::State& state) {
  const PackInput& in = pack_input();
  const auto bytes = static_cast<size_t>(in.tokens * kPackedBytesPerToken);
  std::vector<char> from(bytes, 1);
  for (auto _ : state) {
    std::vector<char> to(bytes);  // allocate like the packer does
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::DoNotOptimize(to.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_MemcpySameBytes)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace thdpack::bench

BENCHMARK_MAIN();
