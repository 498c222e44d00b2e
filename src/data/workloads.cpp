#include "thdpack/data/workloads.hpp"

#include <string>

#include "core/name_lookup.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"

namespace thdpack {
namespace {

MockConfig lognormal(int64_t min_len, int64_t max_len, double mean, double sigma) {
  MockConfig c;
  c.type = LengthDistributionType::kLognormal;
  c.min_seq_len = min_len;
  c.max_seq_len = max_len;
  c.mean_seq_len = mean;
  c.lognormal_sigma = sigma;
  return c;
}

MockConfig uniform(int64_t min_len, int64_t max_len) {
  MockConfig c;
  c.type = LengthDistributionType::kUniform;
  c.min_seq_len = min_len;
  c.max_seq_len = max_len;
  return c;
}

MockConfig bimodal(int64_t short_min, int64_t short_max, int64_t long_min, int64_t long_max,
                   double long_fraction) {
  MockConfig c;
  c.type = LengthDistributionType::kBimodal;
  c.short_min = short_min;
  c.short_max = short_max;
  c.long_min = long_min;
  c.long_max = long_max;
  c.long_fraction = long_fraction;
  c.min_seq_len = short_min;
  c.max_seq_len = long_max;
  return c;
}

const std::vector<Workload>& all() {
  static const std::vector<Workload> kWorkloads = {
      {"sft-8k",
       "Megatron's default mock for S=8192: lognormal mean 6144, sigma 1.1, [4096, 8192]",
       default_mock_config(8192),
       8192,
       1,
       {{8, 256}, {64, 1024}}},
      {"longtail-32k",
       "long tail: lognormal mean 2000, sigma 1.0, [16, 32768]",
       lognormal(16, 32768, 2000, 1.0),
       32768,
       1,
       {{8, 512}, {64, 2048}}},
      {"uniform-16k", "uniform [64, 16384]", uniform(64, 16384), 16384, 1, {{8, 512}}},
      {"bimodal-16k",
       "80% uniform [64, 512], 20% uniform [8192, 16384]",
       bimodal(64, 512, 8192, 16384, 0.2),
       16384,
       1,
       {{8, 512}}},
      {"rl-64k",
       "RL rollouts: lognormal mean 6000, sigma 1.2, [256, 65536], cp 4",
       lognormal(256, 65536, 6000, 1.2),
       16384,
       4,
       {{32, 1024}}},
      {"longctx-128k",
       "long context: lognormal mean 8000, sigma 1.5, [256, 131072], cp 8 (the 32 ranks of dp 8 "
       "x cp 4; fixed CP needs cp 8 to hold 131072 tokens at M = 16384)",
       lognormal(256, 131072, 8000, 1.5),
       16384,
       8,
       {{4, 256}, {32, 2048}}},
  };
  return kWorkloads;
}

}  // namespace

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (const auto& w : all()) names.push_back(w.name);
  return names;
}

Workload workload(const std::string& name) {
  for (const auto& w : all()) {
    if (w.name == name) return w;
  }
  detail::throw_unknown_name("workload", name, workload_names());
}

int64_t default_global_batch(const Workload& w, int dp) {
  check(dp >= 1, "dp must be >= 1, got ", dp);
  check(!w.reference_batches.empty(), "workload '", w.name,
        "' has no reference batch to scale to dp=", dp);
  for (const auto& [ref_dp, batch] : w.reference_batches) {
    if (ref_dp == dp) return batch;
  }
  const auto& [ref_dp, batch] = w.reference_batches.front();
  return batch / ref_dp * dp;
}

}  // namespace thdpack
