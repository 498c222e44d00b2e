#include "schedule/schedule_items.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack::detail {

std::vector<int64_t> rank_starts(const ScheduleInput& input, int dp) {
  std::vector<int64_t> starts(static_cast<size_t>(dp) + 1, 0);
  const auto n = static_cast<int64_t>(input.ids.size());
  for (int r = 0; r < dp; ++r) {
    const int64_t count =
        input.samples_per_rank.empty() ? n / dp : input.samples_per_rank[static_cast<size_t>(r)];
    starts[static_cast<size_t>(r) + 1] = starts[static_cast<size_t>(r)] + count;
  }
  return starts;
}

namespace {

// Without group ids every sample is its own item: the same result as the grouped walk below, in a
// few sequential passes (no item map, no per-sample rank table).
ScheduleItems samples_as_items(const ScheduleInput& input, const ScheduleOptions& options) {
  ScheduleItems items;
  const auto n = input.padded_lengths.size();
  items.lengths.assign(input.padded_lengths.begin(), input.padded_lengths.end());
  items.costs.resize(n);
  for (size_t i = 0; i < n; ++i) items.costs[i] = options.cost.cost(items.lengths[i]);
  items.source_rank.resize(n);
  const auto starts = rank_starts(input, options.dp);
  for (int r = 0; r < options.dp; ++r) {
    std::fill(items.source_rank.begin() + starts[static_cast<size_t>(r)],
              items.source_rank.begin() + starts[static_cast<size_t>(r) + 1], r);
  }
  items.offsets.resize(n + 1);
  std::iota(items.offsets.begin(), items.offsets.end(), int64_t{0});
  items.positions.resize(n);
  std::iota(items.positions.begin(), items.positions.end(), int64_t{0});
  return items;
}

// With group ids: items are groups in order of first appearance.
ScheduleItems groups_as_items(const ScheduleInput& input, const ScheduleOptions& options,
                              bool same_rank_groups) {
  ScheduleItems items;
  items.grouped = true;
  const auto n = static_cast<int64_t>(input.ids.size());
  const auto starts = rank_starts(input, options.dp);
  std::vector<int> rank_of(static_cast<size_t>(n));
  for (int r = 0; r < options.dp; ++r) {
    for (int64_t i = starts[static_cast<size_t>(r)]; i < starts[static_cast<size_t>(r) + 1]; ++i) {
      rank_of[static_cast<size_t>(i)] = r;
    }
  }

  std::vector<int64_t> item_of(static_cast<size_t>(n));
  std::unordered_map<int64_t, int64_t> index;
  index.reserve(static_cast<size_t>(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    auto [it, added] =
        index.emplace(input.group_ids[static_cast<size_t>(i)], static_cast<int64_t>(index.size()));
    item_of[static_cast<size_t>(i)] = it->second;
  }
  const auto count = static_cast<int64_t>(index.size());
  items.lengths.assign(static_cast<size_t>(count), 0);
  items.costs.assign(static_cast<size_t>(count), 0.0);
  items.source_rank.assign(static_cast<size_t>(count), -1);
  items.offsets.assign(static_cast<size_t>(count) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    const auto item = static_cast<size_t>(item_of[static_cast<size_t>(i)]);
    const int64_t len = input.padded_lengths[static_cast<size_t>(i)];
    items.lengths[item] += len;
    items.costs[item] += options.cost.cost(len);
    ++items.offsets[item + 1];
    const int rank = rank_of[static_cast<size_t>(i)];
    if (items.source_rank[item] >= 0 && items.source_rank[item] != rank && same_rank_groups) {
      fail("group ", input.group_ids[static_cast<size_t>(i)], " has samples on DP ranks ",
           items.source_rank[item], " and ", rank,
           "; the local scheduler never moves samples between ranks");
    }
    if (items.source_rank[item] < 0) items.source_rank[item] = rank;
  }
  for (size_t i = 0; i + 1 < items.offsets.size(); ++i) items.offsets[i + 1] += items.offsets[i];
  items.positions.resize(static_cast<size_t>(n));
  std::vector<int64_t> cursor(items.offsets.begin(), items.offsets.end() - 1);
  for (int64_t i = 0; i < n; ++i) {
    const auto item = static_cast<size_t>(item_of[static_cast<size_t>(i)]);
    items.positions[static_cast<size_t>(cursor[item]++)] = i;
  }
  return items;
}

}  // namespace

ScheduleItems build_items(const ScheduleInput& input, const ScheduleOptions& options,
                          bool same_rank_groups) {
  ScheduleItems items = input.group_ids.empty() ? samples_as_items(input, options)
                                                : groups_as_items(input, options, same_rank_groups);
  check_items_fit(items.lengths, options.capacity(), items.grouped ? "group" : "sample");
  return items;
}

Plan plan_from_sample_packs(int dp, int cp, const PackLists& packs, const ScheduleInput& input) {
  // Packs usually list their samples in increasing order already; only those that do not are
  // sorted.
  std::vector<int64_t> ids = packs.items;
  for (size_t p = 0; p + 1 < packs.offsets.size(); ++p) {
    const auto first = ids.begin() + packs.offsets[p];
    const auto last = ids.begin() + packs.offsets[p + 1];
    if (!std::is_sorted(first, last)) std::sort(first, last);
  }
  for (int64_t& id : ids) id = input.ids[static_cast<size_t>(id)];
  return Plan(dp, cp, packs.offsets, std::move(ids));
}

Plan plan_from_packs(int dp, int cp, const PackLists& packs, const ScheduleItems& items,
                     const ScheduleInput& input) {
  std::vector<int64_t> offsets;
  offsets.reserve(packs.offsets.size());
  offsets.push_back(0);
  std::vector<int64_t> ids;
  ids.reserve(input.ids.size());
  if (!items.grouped) return plan_from_sample_packs(dp, cp, packs, input);
  for (size_t p = 0; p + 1 < packs.offsets.size(); ++p) {
    // Collect the pack's input positions, sort them, then map them to ids in place.
    const auto begin = ids.size();
    for (int64_t at = packs.offsets[p]; at < packs.offsets[p + 1]; ++at) {
      const auto i = static_cast<size_t>(packs.items[static_cast<size_t>(at)]);
      ids.insert(ids.end(), items.positions.begin() + items.offsets[i],
                 items.positions.begin() + items.offsets[i + 1]);
    }
    std::sort(ids.begin() + static_cast<std::ptrdiff_t>(begin), ids.end());
    for (size_t j = begin; j < ids.size(); ++j) ids[j] = input.ids[static_cast<size_t>(ids[j])];
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  return Plan(dp, cp, std::move(offsets), std::move(ids));
}

}  // namespace thdpack::detail
