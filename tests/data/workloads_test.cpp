// Named workloads of BENCHMARKS.md (include/thdpack/data/workloads.hpp).

#include "thdpack/data/workloads.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;
using Batches = std::vector<std::pair<int, int64_t>>;

void expect_lognormal(const MockConfig& c, int64_t lo, int64_t hi, double mean, double sigma) {
  EXPECT_EQ(c.mode, MockConfig::Mode::kDistribution);
  EXPECT_EQ(c.type, LengthDistributionType::kLognormal);
  EXPECT_EQ(c.min_seq_len, lo);
  EXPECT_EQ(c.max_seq_len, hi);
  EXPECT_DOUBLE_EQ(c.mean_seq_len, mean);
  EXPECT_DOUBLE_EQ(c.lognormal_sigma, sigma);
}

TEST(WorkloadCatalog, HasTheSixBenchmarkWorkloads) {
  const std::vector<std::string> names = workload_names();
  EXPECT_EQ(names.size(), 6u);
  EXPECT_EQ(
      std::set<std::string>(names.begin(), names.end()),
      (std::set<std::string>{"sft-8k", "longtail-32k", "uniform-16k", "bimodal-16k", "rl-64k",
                                      "longctx-128k"}));
  for (const std::string& n : names) {
    const Workload w = workload(n);
    EXPECT_EQ(w.name, n);
    EXPECT_FALSE(w.description.empty()) << n;
    EXPECT_FALSE(w.reference_batches.empty()) << n;
  }
}

TEST(WorkloadCatalog, Sft8k) {
  const Workload w = workload("sft-8k");
  expect_lognormal(w.dataset, 4096, 8192, 6144, 1.1);
  const MockConfig megatron = default_mock_config(8192);
  EXPECT_EQ(w.dataset.min_seq_len, megatron.min_seq_len);
  EXPECT_EQ(w.dataset.max_seq_len, megatron.max_seq_len);
  EXPECT_EQ(w.max_seqlen_per_dp_cp_rank, 8192);
  EXPECT_EQ(w.cp, 1);
  EXPECT_EQ(w.reference_batches, (Batches{{8, 256}, {64, 1024}}));
}

TEST(WorkloadCatalog, Longtail32k) {
  const Workload w = workload("longtail-32k");
  expect_lognormal(w.dataset, 16, 32768, 2000, 1.0);
  EXPECT_EQ(w.max_seqlen_per_dp_cp_rank, 32768);
  EXPECT_EQ(w.cp, 1);
  EXPECT_EQ(w.reference_batches, (Batches{{8, 512}, {64, 2048}}));
}

TEST(WorkloadCatalog, Uniform16k) {
  const Workload w = workload("uniform-16k");
  EXPECT_EQ(w.dataset.mode, MockConfig::Mode::kDistribution);
  EXPECT_EQ(w.dataset.type, LengthDistributionType::kUniform);
  EXPECT_EQ(w.dataset.min_seq_len, 64);
  EXPECT_EQ(w.dataset.max_seq_len, 16384);
  EXPECT_EQ(w.max_seqlen_per_dp_cp_rank, 16384);
  EXPECT_EQ(w.cp, 1);
  ASSERT_FALSE(w.reference_batches.empty());
  EXPECT_EQ(w.reference_batches.front().second, 512);
}

TEST(WorkloadCatalog, Bimodal16k) {
  const Workload w = workload("bimodal-16k");
  EXPECT_EQ(w.dataset.type, LengthDistributionType::kBimodal);
  EXPECT_EQ(w.dataset.short_min, 64);
  EXPECT_EQ(w.dataset.short_max, 512);
  EXPECT_EQ(w.dataset.long_min, 8192);
  EXPECT_EQ(w.dataset.long_max, 16384);
  EXPECT_DOUBLE_EQ(w.dataset.long_fraction, 0.2);
  EXPECT_EQ(w.max_seqlen_per_dp_cp_rank, 16384);
  EXPECT_EQ(w.cp, 1);
  ASSERT_FALSE(w.reference_batches.empty());
  EXPECT_EQ(w.reference_batches.front().second, 512);
}

TEST(WorkloadCatalog, Rl64k) {
  const Workload w = workload("rl-64k");
  expect_lognormal(w.dataset, 256, 65536, 6000, 1.2);
  EXPECT_EQ(w.max_seqlen_per_dp_cp_rank, 16384);
  EXPECT_EQ(w.cp, 4);
  EXPECT_EQ(w.reference_batches, (Batches{{32, 1024}}));
}

TEST(WorkloadCatalog, UnknownNameListsTheKnownOnes) {
  expect_throw_with<InvalidArgument>(
      [] { workload("sft-9k"); },
      {"sft-9k", "sft-8k", "longtail-32k", "uniform-16k", "bimodal-16k", "rl-64k"});
  expect_throw_with<InvalidArgument>([] { workload(""); }, {"sft-8k"});
}

TEST(WorkloadCatalog, EveryWorkloadIsAValidSeededDatasetThatFitsItsCapacity) {
  for (const std::string& n : workload_names()) {
    SCOPED_TRACE(n);
    const Workload w = workload(n);
    ASSERT_NO_THROW(validate(w.dataset));
    // The longest sample fits one pack of C = M·cp tokens (also after padding to 2·cp).
    const int64_t capacity = w.max_seqlen_per_dp_cp_rank * w.cp;
    EXPECT_LE(w.dataset.max_seq_len, capacity);
    EXPECT_EQ(capacity % (w.cp > 1 ? 2 * w.cp : 1), 0);
    const auto d = make_mock_dataset(w.dataset);
    const auto again = make_mock_dataset(workload(n).dataset);
    // Enough samples for the largest reference batch.
    for (const auto& [dp, batch] : w.reference_batches) {
      EXPECT_EQ(batch % dp, 0) << "dp " << dp;
      EXPECT_GE(d->size(), batch);
    }
    for (int64_t i = 0; i < 20'000; ++i) {
      const int64_t len = d->length(i);
      ASSERT_GE(len, w.dataset.min_seq_len) << "index " << i;
      ASSERT_LE(len, w.dataset.max_seq_len) << "index " << i;
      ASSERT_EQ(len, again->length(i)) << "index " << i;
    }
  }
}

TEST(WorkloadCatalog, BimodalLongFractionShowsInTheLengths) {
  const auto d = make_mock_dataset(workload("bimodal-16k").dataset);
  int64_t longs = 0;
  constexpr int64_t kN = 50'000;
  for (int64_t i = 0; i < kN; ++i) longs += d->length(i) >= 8192;
  EXPECT_NEAR(static_cast<double>(longs) / kN, 0.2, 0.01);
}

TEST(WorkloadCatalog, ConfigsRoundTripThroughJson) {
  for (const std::string& n : workload_names()) {
    const MockConfig c = workload(n).dataset;
    const MockConfig back = parse_mock_config(to_json(c));
    EXPECT_EQ(to_json(back), to_json(c)) << n;
    const auto a = make_mock_dataset(c);
    const auto b = make_mock_dataset(back);
    for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(a->length(i), b->length(i)) << n;
  }
}

TEST(WorkloadDefaultBatch, ReferenceBatchesAreUsedWhenDpMatches) {
  EXPECT_EQ(default_global_batch(workload("sft-8k"), 8), 256);
  EXPECT_EQ(default_global_batch(workload("sft-8k"), 64), 1024);
  EXPECT_EQ(default_global_batch(workload("longtail-32k"), 8), 512);
  EXPECT_EQ(default_global_batch(workload("longtail-32k"), 64), 2048);
  EXPECT_EQ(default_global_batch(workload("uniform-16k"), 8), 512);
  EXPECT_EQ(default_global_batch(workload("bimodal-16k"), 8), 512);
  EXPECT_EQ(default_global_batch(workload("rl-64k"), 32), 1024);
}

TEST(WorkloadDefaultBatch, OtherDpScalesTheFirstReferencePerReplica) {
  // sft-8k: 256 / 8 = 32 samples per replica (the first reference, not dp64's 16).
  EXPECT_EQ(default_global_batch(workload("sft-8k"), 1), 32);
  EXPECT_EQ(default_global_batch(workload("sft-8k"), 16), 512);
  EXPECT_EQ(default_global_batch(workload("sft-8k"), 128), 4096);
  // rl-64k: 1024 / 32 = 32 per replica.
  EXPECT_EQ(default_global_batch(workload("rl-64k"), 8), 256);
  EXPECT_EQ(default_global_batch(workload("uniform-16k"), 64), 4096);
  // Whatever dp, the default is a multiple of dp.
  for (const std::string& n : workload_names()) {
    for (int dp : {1, 2, 3, 8, 12, 64, 256}) {
      const int64_t b = default_global_batch(workload(n), dp);
      EXPECT_GT(b, 0) << n << " dp " << dp;
      EXPECT_EQ(b % dp, 0) << n << " dp " << dp;
    }
  }
}

TEST(WorkloadDefaultBatch, CustomWorkload) {
  Workload w;
  w.reference_batches = {{4, 40}, {16, 48}};
  EXPECT_EQ(default_global_batch(w, 4), 40);
  EXPECT_EQ(default_global_batch(w, 16), 48);
  EXPECT_EQ(default_global_batch(w, 2), 20);
  EXPECT_EQ(default_global_batch(w, 32), 320);
}

TEST(WorkloadDefaultBatch, Errors) {
  expect_throw_with<InvalidArgument>([] { default_global_batch(workload("sft-8k"), 0); },
                                     {"dp", "0"});
  expect_throw_with<InvalidArgument>([] { default_global_batch(workload("rl-64k"), -8); },
                                     {"dp", "-8"});
  Workload empty;
  empty.name = "custom";
  expect_throw_with<InvalidArgument>([&] { default_global_batch(empty, 8); },
                                     {"custom", "reference"});
}

}  // namespace
}  // namespace thdpack
