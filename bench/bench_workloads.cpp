#include "bench_workloads.hpp"

#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::bench {

CostModel bench_cost() {
  return CostModel::from_model(model_preset("llama3-8b"));
}

std::vector<int64_t> workload_lengths(const std::string& name, int64_t n,
                                      std::optional<uint64_t> seed) {
  Workload w = workload(name);
  w.dataset.size = std::max<int64_t>(n, w.dataset.size);
  if (seed) w.dataset.seed = *seed;
  const auto dataset = make_mock_dataset(w.dataset);
  const int64_t divisor = padding_divisor({.cp = w.cp});
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    lengths[static_cast<size_t>(i)] = round_up(dataset->length(i), divisor);
  return lengths;
}

BenchBatch workload_batch(const std::string& name, int dp, int64_t global_batch, int64_t step) {
  Workload w = workload(name);
  const auto dataset = make_mock_dataset(w.dataset);
  BenchBatch b;
  b.options = ScheduleOptions::from_topology(Topology({.cp = w.cp, .dp = dp}),
                                             w.max_seqlen_per_dp_cp_rank, bench_cost());
  GlobalBatchOptions o;
  o.global_batch = global_batch;
  o.dp = dp;
  o.divisor = padding_divisor({.cp = w.cp});
  o.capacity = b.options.capacity();
  b.batch = make_global_batch(*dataset, step, o);
  return b;
}

}  // namespace thdpack::bench
