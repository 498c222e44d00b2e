#include "naive_baseline.hpp"

#include <algorithm>
#include <numeric>

#include "thdpack/packing/bin_packing.hpp"

namespace thdpack::bench {

Plan naive_ffd_lpt(const ScheduleInput& input, const ScheduleOptions& options) {
  const int dp = options.dp;
  const Bins bins = first_fit_decreasing(input.padded_lengths, options.capacity());
  std::vector<std::vector<int64_t>> packs;
  for (int64_t p = 0; p < bins.count(); ++p) {
    auto b = bins.bin(p);
    packs.emplace_back(b.begin(), b.end());
  }
  const int64_t multiple = static_cast<int64_t>(dp) * options.microbatch_multiple;
  const auto target = static_cast<size_t>((static_cast<int64_t>(packs.size()) + multiple - 1) /
                                          multiple * multiple);
  // Split the packs with the most samples until every replica can get K of them.
  while (packs.size() < target) {
    auto most = std::max_element(packs.begin(), packs.end(),
                                 [](const auto& a, const auto& b) { return a.size() < b.size(); });
    const int64_t item = most->back();
    most->pop_back();
    packs.push_back({item});
  }
  const int64_t k = static_cast<int64_t>(packs.size()) / dp;
  std::vector<double> cost(packs.size(), 0.0);
  for (size_t p = 0; p < packs.size(); ++p) {
    for (int64_t i : packs[p])
      cost[p] += options.cost.cost(input.padded_lengths[static_cast<size_t>(i)]);
  }
  std::vector<size_t> order(packs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<double> load(static_cast<size_t>(dp), 0.0);
  std::vector<std::vector<std::vector<int64_t>>> per_replica(static_cast<size_t>(dp));
  for (size_t p : order) {
    size_t best = 0;
    for (size_t r = 0; r < load.size(); ++r) {
      if (static_cast<int64_t>(per_replica[r].size()) == k) continue;
      if (static_cast<int64_t>(per_replica[best].size()) == k || load[r] < load[best]) best = r;
    }
    load[best] += cost[p];
    std::vector<int64_t> ids;
    for (int64_t i : packs[p]) ids.push_back(input.ids[static_cast<size_t>(i)]);
    per_replica[best].push_back(std::move(ids));
  }
  std::vector<std::vector<int64_t>> plan_packs;
  for (int64_t step = 0; step < k; ++step) {
    for (int r = 0; r < dp; ++r)
      plan_packs.push_back(per_replica[static_cast<size_t>(r)][static_cast<size_t>(step)]);
  }
  return Plan(dp, options.cp, plan_packs);
}

}  // namespace thdpack::bench
