#include "schedule/oversize_groups.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>

#include "schedule/group_deal.hpp"
#include "schedule/pack_splitting.hpp"
#include "schedule/room_index.hpp"
#include "schedule/schedulers.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/oversize_fix.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack::detail {
namespace {

using Item = std::vector<int64_t>;  // input positions that stay in one pack
using Pack = std::vector<Item>;

// Consecutive packs that stay on one replica: a run (an oversize group), or one ordinary pack.
struct Unit {
  std::vector<Pack> packs;
  double cost = 0;
};

struct Batch {
  const ScheduleInput& input;
  const ScheduleOptions& options;
  std::vector<double> cost;               // per input position
  std::vector<std::vector<int64_t>> big;  // oversize groups' positions, by increasing group id
  std::vector<char> in_run;               // per input position: in an oversize group
  std::vector<int64_t> rest;              // the other positions, increasing

  int64_t length(int64_t position) const {
    return input.padded_lengths[static_cast<size_t>(position)];
  }
  int64_t group(int64_t position) const { return input.group_ids[static_cast<size_t>(position)]; }
  template <class Positions>
  int64_t tokens(const Positions& positions) const {
    int64_t sum = 0;
    for (int64_t p : positions) sum += length(p);
    return sum;
  }
  template <class Positions>
  double cost_of(const Positions& positions) const {
    double sum = 0;
    for (int64_t p : positions) sum += cost[static_cast<size_t>(p)];
    return sum;
  }
  double pack_cost(const Pack& pack) const {
    double sum = 0;
    for (const Item& item : pack) sum += cost_of(item);
    return sum;
  }
};

// Items of `positions` keyed by group id, in order of first appearance.
std::vector<Item> items_by_group(const Batch& b, std::span<const int64_t> positions) {
  std::vector<Item> items;
  std::unordered_map<int64_t, size_t> index;
  for (int64_t p : positions) {
    auto [it, added] = index.emplace(b.group(p), items.size());
    if (added) items.emplace_back();
    items[it->second].push_back(p);
  }
  return items;
}

// One run per oversize group: its samples first-fit decreasing into packs of one sample item each.
std::vector<Unit> runs_of(const Batch& b) {
  const int64_t capacity = b.options.capacity();
  std::vector<Unit> runs;
  for (const auto& positions : b.big) {
    std::vector<int64_t> lengths;
    for (int64_t p : positions) lengths.push_back(b.length(p));
    const Bins bins = first_fit_decreasing(lengths, capacity);
    Unit run;
    for (int64_t k = 0; k < bins.count(); ++k) {
      std::vector<int64_t> members(bins.bin(k).begin(), bins.bin(k).end());
      std::sort(members.begin(), members.end());
      Pack pack;
      for (int64_t j : members) pack.push_back({positions[static_cast<size_t>(j)]});
      run.packs.push_back(std::move(pack));
    }
    run.cost = b.cost_of(positions);
    runs.push_back(std::move(run));
  }
  return runs;
}

// First-fit decreasing of the other items into the room the runs' packs leave; returns the
// positions still to place, increasing.
std::vector<int64_t> top_up_runs(const Batch& b, std::vector<Unit>& runs) {
  std::vector<Item> items = items_by_group(b, b.rest);
  std::vector<int64_t> size(items.size());
  for (size_t i = 0; i < items.size(); ++i) size[i] = b.tokens(items[i]);
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return size[x] > size[y]; });
  // The runs' packs in order (run by run) as the bins of one first-fit index.
  std::vector<std::pair<size_t, size_t>> run_pack;  // bin -> (run, pack)
  for (size_t u = 0; u < runs.size(); ++u) {
    for (size_t p = 0; p < runs[u].packs.size(); ++p) run_pack.emplace_back(u, p);
  }
  RoomIndex room(1, static_cast<int64_t>(run_pack.size()), b.options.capacity());
  for (size_t bin = 0; bin < run_pack.size(); ++bin) {
    int64_t used = 0;
    for (const Item& item : runs[run_pack[bin].first].packs[run_pack[bin].second])
      used += b.tokens(item);
    room.set(static_cast<int64_t>(bin), b.options.capacity() - used);
  }
  std::vector<char> placed(b.input.ids.size(), 0);
  for (size_t i : order) {
    const int64_t bin = room.first_fit(0, size[i]);
    if (bin < 0) continue;
    const auto [u, p] = run_pack[static_cast<size_t>(bin)];
    runs[u].packs[p].push_back(items[i]);
    runs[u].cost += b.cost_of(items[i]);
    room.set(bin, room.room(bin) - size[i]);
    for (int64_t q : items[i]) placed[static_cast<size_t>(q)] = 1;
  }
  std::vector<int64_t> left;
  for (int64_t p : b.rest)
    if (!placed[static_cast<size_t>(p)]) left.push_back(p);
  return left;
}

// The remaining positions packed by "balanced" on one replica, one unit per pack.
std::vector<Unit> packs_of_rest(const Batch& b, const std::vector<int64_t>& rest) {
  std::vector<Unit> units;
  if (rest.empty()) return units;
  std::vector<int64_t> ids(rest.size()), lengths, groups;
  std::iota(ids.begin(), ids.end(), int64_t{0});
  for (int64_t p : rest) {
    lengths.push_back(b.length(p));
    groups.push_back(b.group(p));
  }
  ScheduleOptions one = b.options;
  one.dp = 1;
  one.pp = 1;
  one.microbatch_multiple = 1;
  const Plan plan = BalancedScheduler().schedule({ids, lengths, {}, groups}, one);
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    std::vector<int64_t> positions;
    for (int64_t i : plan.pack(k, 0)) positions.push_back(rest[static_cast<size_t>(i)]);
    units.push_back(Unit{{items_by_group(b, positions)}, b.cost_of(positions)});
  }
  return units;
}

// Count-capped longest-processing-time: runs (most packs first), then single packs, each to the
// cheapest replica that still has room for it under the common count K, raised until all fit.
std::pair<std::vector<std::vector<Pack>>, int64_t> deal_units(std::vector<Unit> runs,
                                                              std::vector<Unit> singles, int dp,
                                                              int64_t multiple) {
  int64_t total = static_cast<int64_t>(singles.size());
  int64_t longest = 0;
  for (const Unit& run : runs) {
    total += static_cast<int64_t>(run.packs.size());
    longest = std::max(longest, static_cast<int64_t>(run.packs.size()));
  }
  int64_t k = std::max((total + dp - 1) / dp, longest);
  k = (k + multiple - 1) / multiple * multiple;
  std::stable_sort(runs.begin(), runs.end(), [](const Unit& x, const Unit& y) {
    if (x.packs.size() != y.packs.size()) return x.packs.size() > y.packs.size();
    return x.cost > y.cost;
  });
  std::stable_sort(singles.begin(), singles.end(),
                   [](const Unit& x, const Unit& y) { return x.cost > y.cost; });
  std::vector<const Unit*> order;
  for (const Unit& u : runs) order.push_back(&u);
  for (const Unit& u : singles) order.push_back(&u);
  for (;; k += multiple) {
    std::vector<double> load(static_cast<size_t>(dp), 0.0);
    std::vector<int64_t> count(static_cast<size_t>(dp), 0);
    std::vector<std::vector<Pack>> packs(static_cast<size_t>(dp));
    bool placed = true;
    for (const Unit* unit : order) {
      const auto need = static_cast<int64_t>(unit->packs.size());
      int best = -1;
      for (int r = 0; r < dp; ++r) {
        const auto q = static_cast<size_t>(r);
        if (count[q] + need > k) continue;
        const auto b = static_cast<size_t>(best);
        if (best < 0 || load[q] < load[b] || (load[q] == load[b] && count[q] < count[b])) best = r;
      }
      if (best < 0) {
        placed = false;
        break;
      }
      const auto q = static_cast<size_t>(best);
      packs[q].insert(packs[q].end(), unit->packs.begin(), unit->packs.end());
      count[q] += need;
      load[q] += unit->cost;
    }
    if (placed) return {std::move(packs), k};
  }
}

// A replica's packs split until it has `target` (split_item_packs_to).
std::vector<std::vector<int64_t>> fill_to(const Batch& b, std::vector<Pack> packs, int64_t target,
                                          int rank) {
  auto split = split_item_packs_to(std::move(packs), target, b.cost, b.in_run);
  if (static_cast<int64_t>(split.size()) < target) {
    fail("DP rank ", rank, " needs ", target, " micro-batches but its samples make only ",
         split.size(),
         " (groups stay whole, a group larger than one micro-batch on one rank); give more "
         "samples or lower dp");
  }
  return split;
}

struct Outcome {
  Plan plan;
  double slowest = 0;  // the costliest replica's summed sample cost
};

// The plan of each replica's packs (input positions), all replicas with k packs.
Plan plan_of(const Batch& b, const std::vector<std::vector<std::vector<int64_t>>>& ranks,
             int64_t k) {
  const int dp = b.options.dp;
  std::vector<int64_t> offsets{0}, ids;
  for (int64_t step = 0; step < k; ++step) {
    for (int r = 0; r < dp; ++r) {
      for (int64_t p : ranks[static_cast<size_t>(r)][static_cast<size_t>(step)])
        ids.push_back(b.input.ids[static_cast<size_t>(p)]);
      offsets.push_back(static_cast<int64_t>(ids.size()));
    }
  }
  return Plan(dp, b.options.cp, std::move(offsets), std::move(ids));
}

Outcome plan_once(const Batch& b, bool top_up) {
  std::vector<Unit> runs = runs_of(b);
  const std::vector<int64_t> rest = top_up ? top_up_runs(b, runs) : b.rest;
  auto [dealt, k] = deal_units(std::move(runs), packs_of_rest(b, rest), b.options.dp,
                               b.options.microbatch_multiple);
  std::vector<std::vector<std::vector<int64_t>>> ranks;
  Outcome out;
  for (int r = 0; r < b.options.dp; ++r) {
    ranks.push_back(fill_to(b, std::move(dealt[static_cast<size_t>(r)]), k, r));
    double load = 0;
    for (const auto& pack : ranks.back()) load += b.cost_of(pack);
    out.slowest = std::max(out.slowest, load);
  }
  out.plan = plan_of(b, ranks, k);
  return out;
}

}  // namespace

std::optional<Plan> plan_with_oversize_groups(const ScheduleInput& input,
                                              const ScheduleOptions& options) {
  if (input.group_ids.empty()) return std::nullopt;
  const int64_t capacity = options.capacity();
  std::map<int64_t, std::vector<int64_t>> groups;  // by increasing group id
  std::unordered_map<int64_t, int64_t> totals;
  for (size_t i = 0; i < input.ids.size(); ++i)
    totals[input.group_ids[i]] += input.padded_lengths[i];
  for (size_t i = 0; i < input.ids.size(); ++i) {
    if (totals[input.group_ids[i]] > capacity)
      groups[input.group_ids[i]].push_back(static_cast<int64_t>(i));
  }
  if (groups.empty()) return std::nullopt;

  Batch b{input, options, {}, {}, std::vector<char>(input.ids.size(), 0), {}};
  for (auto& [id, positions] : groups) {
    for (int64_t p : positions) {
      if (b.length(p) > capacity) {
        fail("sample ", input.ids[static_cast<size_t>(p)], " has ", b.length(p),
             " padded tokens but the cap is ", capacity, " (max_seqlen_per_dp_cp_rank x cp); ",
             kOversizeFix);
      }
      b.in_run[static_cast<size_t>(p)] = 1;
    }
    b.big.push_back(std::move(positions));
  }
  b.cost.reserve(input.ids.size());
  for (size_t i = 0; i < input.ids.size(); ++i) {
    b.cost.push_back(options.cost.cost(input.padded_lengths[i]));
    if (!b.in_run[i]) b.rest.push_back(static_cast<int64_t>(i));
  }
  // Candidates, the first with the cheapest slowest replica kept. Count-capped dealing of the runs
  // and packs (with the runs' room filled, usually best, or without: more, smaller packs, which can
  // deal out better) needs the fewest micro-batches; the longest-first deal of whole groups,
  // refined, balances at least as well as a framework's greedy and is repaired where the dealing
  // leaves a replica too few samples for the common count.
  std::optional<Outcome> best;
  std::optional<InvalidArgument> refusal;
  auto consider = [&](auto make) {
    try {
      Outcome o = make();
      if (!best || o.slowest < best->slowest) best = std::move(o);
    } catch (const InvalidArgument& e) {
      if (!refusal) refusal = e;
    }
  };
  consider([&] { return plan_once(b, /*top_up=*/true); });
  consider([&] { return plan_once(b, /*top_up=*/false); });
  if (auto deal = deal_groups_longest_first(input, options, b.cost)) {
    consider([&] { return Outcome{plan_of(b, deal->replicas, deal->k), deal->slowest}; });
  }
  if (!best) throw *refusal;
  return std::move(best->plan);
}

}  // namespace thdpack::detail
