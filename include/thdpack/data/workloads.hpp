#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Named, seeded workloads of BENCHMARKS.md (sft-8k, longtail-32k, uniform-16k, bimodal-16k,
// rl-64k, longctx-128k): a mock length distribution, the per-rank cap M, the CP size and reference batch sizes.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/data/mock_dataset.hpp"

namespace thdpack {

struct Workload {
  std::string name;
  std::string description;
  MockConfig dataset;
  int64_t max_seqlen_per_dp_cp_rank = 0;  ///< M
  int cp = 1;
  /// (dp, global batch in samples) pairs from BENCHMARKS.md; the first is the default layout.
  std::vector<std::pair<int, int64_t>> reference_batches;
};

std::vector<std::string> workload_names();
/// The workload called `name`; throws InvalidArgument listing the names when unknown.
Workload workload(const std::string& name);

/// The global batch for `dp`: the reference batch for that dp if there is one, else the first
/// reference's samples per replica times dp. Throws InvalidArgument when dp < 1 or the workload has
/// no reference batch.
int64_t default_global_batch(const Workload& w, int dp);

}  // namespace thdpack
