#include "schedule/lpt_baseline.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

#include "packing/sorted_items.hpp"

namespace thdpack::detail {

std::optional<Bins> split_first_fit_packs(const ScheduleItems& ranked, int dp, int64_t multiple,
                                          int64_t capacity) {
  // Ranked items come by decreasing cost; without groups that is decreasing length, ties by
  // index, the order first fit decreasing takes them in.
  const bool descending =
      std::is_sorted(ranked.lengths.begin(), ranked.lengths.end(), std::greater<>());
  const Bins first_fit = descending ? first_fit_decreasing_of_descending(ranked.lengths, capacity)
                                    : first_fit_decreasing(ranked.lengths, capacity);
  const int64_t count = first_fit.count();
  const int64_t target = round_up_to(count, static_cast<int64_t>(dp) * multiple);
  if (target > ranked.size()) return std::nullopt;
  // Each pack keeps a prefix of its first-fit items; a split shortens the fullest pack (the first
  // of them) and gives its last item a pack of its own, appended after the others.
  std::vector<int64_t> size(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) size[static_cast<size_t>(p)] = first_fit.bin(p).size();
  std::priority_queue<std::pair<int64_t, int64_t>> fullest;  // (size, -pack)
  for (int64_t p = 0; p < count; ++p) fullest.emplace(size[static_cast<size_t>(p)], -p);
  std::vector<int64_t> moved;
  while (count + static_cast<int64_t>(moved.size()) < target) {
    const int64_t p = -fullest.top().second;
    fullest.pop();
    moved.push_back(first_fit.bin(p)[static_cast<size_t>(--size[static_cast<size_t>(p)])]);
    fullest.emplace(size[static_cast<size_t>(p)], -p);
  }
  Bins out;
  out.items.reserve(ranked.lengths.size());
  for (int64_t p = 0; p < count; ++p) {
    const auto items = first_fit.bin(p).first(static_cast<size_t>(size[static_cast<size_t>(p)]));
    out.items.insert(out.items.end(), items.begin(), items.end());
    out.offsets.push_back(static_cast<int64_t>(out.items.size()));
  }
  for (int64_t item : moved) {
    out.items.push_back(item);
    out.offsets.push_back(static_cast<int64_t>(out.items.size()));
  }
  return out;
}

double lpt_step_cost(const ScheduleItems& ranked, const Bins& packs, int dp, int pp) {
  std::vector<double> cost(static_cast<size_t>(packs.count()), 0.0);
  for (int64_t p = 0; p < packs.count(); ++p) {
    for (int64_t item : packs.bin(p))
      cost[static_cast<size_t>(p)] += ranked.costs[static_cast<size_t>(item)];
  }
  std::vector<int64_t> order(cost.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return cost[static_cast<size_t>(a)] > cost[static_cast<size_t>(b)];
  });
  const int64_t k = packs.count() / dp;
  using Replica = std::pair<double, int>;  // (load, index): least loaded, then lowest index
  std::priority_queue<Replica, std::vector<Replica>, std::greater<>> open;
  for (int r = 0; r < dp; ++r) open.emplace(0.0, r);
  std::vector<int64_t> taken(static_cast<size_t>(dp), 0);
  std::vector<double> load(static_cast<size_t>(dp), 0.0), largest(static_cast<size_t>(dp), 0.0);
  for (int64_t p : order) {
    const int r = open.top().second;
    open.pop();
    load[static_cast<size_t>(r)] += cost[static_cast<size_t>(p)];
    largest[static_cast<size_t>(r)] =
        std::max(largest[static_cast<size_t>(r)], cost[static_cast<size_t>(p)]);
    if (++taken[static_cast<size_t>(r)] < k) open.emplace(load[static_cast<size_t>(r)], r);
  }
  const double bubble = pp > 1 ? static_cast<double>(pp - 1) / pp : 0.0;
  double worst = 0;
  for (int r = 0; r < dp; ++r) {
    worst =
        std::max(worst, load[static_cast<size_t>(r)] + bubble * largest[static_cast<size_t>(r)]);
  }
  return worst;
}

BalancedAssignment lpt_assignment(const ScheduleItems& ranked, const Bins& packs, int dp,
                                  int64_t capacity) {
  BalancedAssignment a(ranked, dp, packs.count() / dp, capacity);
  a.place_packs(packs);
  return a;
}

}  // namespace thdpack::detail
