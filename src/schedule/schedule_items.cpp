#include "schedule/schedule_items.hpp"

#include <algorithm>
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

ScheduleItems build_items(const ScheduleInput& input, const ScheduleOptions& options,
                          bool same_rank_groups) {
  ScheduleItems items;
  const auto n = static_cast<int64_t>(input.ids.size());
  const auto starts = rank_starts(input, options.dp);
  std::vector<int> rank_of(static_cast<size_t>(n));
  for (int r = 0; r < options.dp; ++r) {
    for (int64_t i = starts[static_cast<size_t>(r)]; i < starts[static_cast<size_t>(r) + 1]; ++i) {
      rank_of[static_cast<size_t>(i)] = r;
    }
  }

  std::vector<int64_t> item_of(static_cast<size_t>(n));
  if (input.group_ids.empty()) {
    for (int64_t i = 0; i < n; ++i) item_of[static_cast<size_t>(i)] = i;
  } else {
    items.grouped = true;
    std::unordered_map<int64_t, int64_t> index;
    index.reserve(static_cast<size_t>(n) * 2);
    for (int64_t i = 0; i < n; ++i) {
      auto [it, added] = index.emplace(input.group_ids[static_cast<size_t>(i)],
                                       static_cast<int64_t>(index.size()));
      item_of[static_cast<size_t>(i)] = it->second;
    }
  }
  const int64_t count = items.grouped ? *std::max_element(item_of.begin(), item_of.end()) + 1 : n;
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
      throw InvalidArgument("group " + std::to_string(input.group_ids[static_cast<size_t>(i)]) +
                            " has samples on DP ranks " + std::to_string(items.source_rank[item]) +
                            " and " + std::to_string(rank) +
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
  check_items_fit(items.lengths, options.capacity(), items.grouped ? "group" : "sample");
  return items;
}

Plan plan_from_packs(int dp, const PackLists& packs, const ScheduleItems& items,
                     const ScheduleInput& input) {
  std::vector<int64_t> offsets;
  offsets.reserve(packs.offsets.size());
  offsets.push_back(0);
  std::vector<int64_t> ids;
  ids.reserve(input.ids.size());
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
  return Plan(dp, std::move(offsets), std::move(ids));
}

}  // namespace thdpack::detail
