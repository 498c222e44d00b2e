#include "schedule/group_deal.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>
#include <unordered_map>

#include "schedule/pack_splitting.hpp"
#include "schedule/room_index.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack::detail {
namespace {

using Item = std::vector<int64_t>;  // input positions that stay in one pack
using Pack = std::vector<Item>;

struct Group {
  std::vector<int64_t> positions;  // increasing
  int64_t tokens = 0;
  double cost = 0;
  bool big = false;  // over the capacity: its samples spread over consecutive packs
  int64_t atoms() const { return big ? static_cast<int64_t>(positions.size()) : 1; }
};

// A deal of the groups over the replicas, with what each replica's count feasibility needs.
struct Deal {
  const ScheduleInput& input;
  const ScheduleOptions& options;
  std::span<const double> cost;
  std::vector<Group> groups;   // costliest first, ties by first position
  std::vector<int> replica;    // group -> replica
  std::vector<double> load;    // replica -> summed cost
  std::vector<int64_t> atoms;  // replica -> packs it can split into at most
  std::vector<int64_t> packs;  // replica -> packs its groups need (first-fit decreasing)
  std::vector<char> in_run;    // position -> in a big group

  int64_t length(int64_t p) const { return input.padded_lengths[static_cast<size_t>(p)]; }
  int dp() const { return options.dp; }
};

std::vector<Group> groups_of(const ScheduleInput& input, int64_t capacity,
                             std::span<const double> cost) {
  std::vector<Group> groups;
  std::unordered_map<int64_t, size_t> index;
  for (size_t i = 0; i < input.ids.size(); ++i) {
    auto [it, added] = index.emplace(input.group_ids[i], groups.size());
    if (added) groups.emplace_back();
    Group& g = groups[it->second];
    g.positions.push_back(static_cast<int64_t>(i));
    g.tokens += input.padded_lengths[i];
    g.cost += cost[i];
  }
  for (Group& g : groups) g.big = g.tokens > capacity;
  // Groups appear in order of first position, so a stable sort breaks cost ties by it.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& x, const Group& y) { return x.cost > y.cost; });
  return groups;
}

// First-fit decreasing of one big group's samples into packs of their own: a run of consecutive
// packs, one sample item each.
void add_run(const Deal& d, const Group& g, std::vector<Pack>& packs, std::vector<int64_t>& used) {
  Item order = g.positions;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return d.length(x) > d.length(y); });
  const size_t first = packs.size();
  const int64_t capacity = d.options.capacity();
  for (int64_t p : order) {
    size_t at = first;
    while (at < packs.size() && used[at] + d.length(p) > capacity) ++at;
    if (at == packs.size()) {
      packs.emplace_back();
      used.push_back(0);
    }
    packs[at].push_back({p});
    used[at] += d.length(p);
  }
  // Samples in input order within each pack (the items of a run pack are all its own samples).
  for (size_t k = first; k < packs.size(); ++k) std::sort(packs[k].begin(), packs[k].end());
}

// One replica's packs: its big groups' runs first (so each run stays consecutive), then its whole
// groups first-fit decreasing into the room the runs leave and into new packs.
std::vector<Pack> replica_packs(const Deal& d, int r) {
  std::vector<Pack> packs;
  std::vector<int64_t> used;
  std::vector<size_t> whole;
  for (size_t g = 0; g < d.groups.size(); ++g) {
    if (d.replica[g] != r) continue;
    if (d.groups[g].big) {
      add_run(d, d.groups[g], packs, used);
    } else {
      whole.push_back(g);
    }
  }
  std::stable_sort(whole.begin(), whole.end(),
                   [&](size_t x, size_t y) { return d.groups[x].tokens > d.groups[y].tokens; });
  const int64_t capacity = d.options.capacity();
  // Empty bins past the used ones have full room, so first fit opens the next one when needed.
  RoomIndex room(1, static_cast<int64_t>(packs.size() + whole.size()) + 1, capacity);
  for (size_t k = 0; k < packs.size(); ++k) room.set(static_cast<int64_t>(k), capacity - used[k]);
  for (size_t g : whole) {
    const int64_t tokens = d.groups[g].tokens;
    const auto bin = static_cast<size_t>(room.first_fit(0, tokens));
    if (bin == packs.size()) packs.emplace_back();
    packs[bin].push_back(d.groups[g].positions);
    room.set(static_cast<int64_t>(bin), room.room(static_cast<int64_t>(bin)) - tokens);
  }
  return packs;
}

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The common micro-batch count the deal needs: every replica's packs, rounded to the multiple.
int64_t common_k(const Deal& d) {
  const int64_t most = *std::max_element(d.packs.begin(), d.packs.end());
  return round_up(std::max<int64_t>(most, 1), d.options.microbatch_multiple);
}

// How many micro-batches the replicas lack to reach the common count by splitting packs (each
// replica can split down to one sample of a big group, or one whole group, per pack): 0 when the
// deal can be planned.
int64_t shortfall(const Deal& d) {
  const int64_t k = common_k(d);
  int64_t missing = 0;
  for (int64_t a : d.atoms) missing += std::max<int64_t>(0, k - a);
  return missing;
}

double slowest(const Deal& d) {
  return *std::max_element(d.load.begin(), d.load.end());
}

void refresh(Deal& d, int r) {
  d.packs[static_cast<size_t>(r)] = static_cast<int64_t>(replica_packs(d, r).size());
}

// Moves group g to replica `to`, updating the replicas' figures.
void move_group(Deal& d, size_t g, int to) {
  const int from = d.replica[g];
  const Group& group = d.groups[g];
  d.load[static_cast<size_t>(from)] -= group.cost;
  d.atoms[static_cast<size_t>(from)] -= group.atoms();
  d.replica[g] = to;
  d.load[static_cast<size_t>(to)] += group.cost;
  d.atoms[static_cast<size_t>(to)] += group.atoms();
  refresh(d, from);
  refresh(d, to);
}

// The replicas' figures of the assignment in d.replica.
void tally(Deal& d) {
  const auto dp = static_cast<size_t>(d.dp());
  d.load.assign(dp, 0.0);
  d.atoms.assign(dp, 0);
  d.packs.assign(dp, 0);
  for (size_t g = 0; g < d.groups.size(); ++g) {
    const auto r = static_cast<size_t>(d.replica[g]);
    d.load[r] += d.groups[g].cost;
    d.atoms[r] += d.groups[g].atoms();
  }
  for (int r = 0; r < d.dp(); ++r) refresh(d, r);
}

// The plain longest-first deal: each group, costliest first, to the cheapest replica (ties to the
// lowest replica), as a framework's greedy would do.
void deal_longest_first(Deal& d) {
  std::vector<double> load(static_cast<size_t>(d.dp()), 0.0);
  d.replica.assign(d.groups.size(), 0);
  for (size_t g = 0; g < d.groups.size(); ++g) {
    const auto r = std::min_element(load.begin(), load.end()) - load.begin();
    d.replica[g] = static_cast<int>(r);
    load[static_cast<size_t>(r)] += d.groups[g].cost;
  }
  tally(d);
}

// One state of the largest-differencing method: dp parts, largest first.
struct Differencing {
  std::vector<double> sums;
  std::vector<std::vector<size_t>> parts;  // group indices
  int64_t order = 0;                       // creation order: ties pop the oldest first
  double spread() const { return sums.front() - sums.back(); }
};

void sort_parts(Differencing& s) {
  std::vector<size_t> by(s.sums.size());
  std::iota(by.begin(), by.end(), size_t{0});
  std::stable_sort(by.begin(), by.end(), [&](size_t x, size_t y) { return s.sums[x] > s.sums[y]; });
  Differencing sorted{{}, {}, s.order};
  for (size_t q : by) {
    sorted.sums.push_back(s.sums[q]);
    sorted.parts.push_back(std::move(s.parts[q]));
  }
  s = std::move(sorted);
}

// Karmarkar-Karp's k-way differencing over the groups' costs (what verl balances ranks with):
// the two states of largest spread merge, largest part with smallest, until one is left. It often
// beats longest-first where a few groups dominate. With equal_count (n a multiple of dp), every
// replica gets n / dp groups.
void deal_differencing(Deal& d, bool equal_count) {
  const auto k = static_cast<size_t>(d.dp());
  auto after = [](const Differencing& x, const Differencing& y) {
    if (x.spread() != y.spread()) return x.spread() < y.spread();
    return x.order > y.order;
  };
  std::priority_queue<Differencing, std::vector<Differencing>, decltype(after)> heap(after);
  int64_t order = 0;
  const size_t n = d.groups.size();
  // Equal counts: the groups, cheapest first, k at a time form the first states (every part gets
  // n / k groups, as GRPO's equal-size groups over the ranks); else one group per state.
  const size_t per_state = equal_count ? k : 1;
  for (size_t at = 0; at < n; at += per_state) {
    Differencing s{std::vector<double>(k, 0.0), std::vector<std::vector<size_t>>(k), order++};
    for (size_t j = 0; j < per_state; ++j) {
      const size_t g = equal_count ? n - 1 - (at + j) : at;  // groups are costliest first
      s.sums[j] = d.groups[g].cost;
      s.parts[j].push_back(g);
    }
    sort_parts(s);
    heap.push(std::move(s));
  }
  while (heap.size() > 1) {
    Differencing a = heap.top();
    heap.pop();
    const Differencing b = heap.top();
    heap.pop();
    for (size_t i = 0; i < k; ++i) {
      a.sums[i] += b.sums[k - 1 - i];
      a.parts[i].insert(a.parts[i].end(), b.parts[k - 1 - i].begin(), b.parts[k - 1 - i].end());
    }
    a.order = order++;
    sort_parts(a);
    heap.push(std::move(a));
  }
  d.replica.assign(d.groups.size(), 0);
  for (size_t q = 0; q < k; ++q) {
    for (size_t g : heap.top().parts[q]) d.replica[g] = static_cast<int>(q);
  }
  tally(d);
}

// A change of the deal: group `g` to replica `to`, and, for a swap, group `back` to g's replica.
struct Change {
  size_t g = 0;
  int to = 0;
  std::optional<size_t> back;
};

void apply(Deal& d, const Change& c) {
  const int from = d.replica[c.g];
  move_group(d, c.g, c.to);
  if (c.back) move_group(d, *c.back, from);
}

void undo(Deal& d, const Change& c, int from) {
  if (c.back) move_group(d, *c.back, c.to);
  move_group(d, c.g, from);
}

// Bounds the work of the repair and the refinement: each tried change re-packs two replicas, and
// swaps are quadratic in the groups (many groups need them less: moves balance them finely).
constexpr int64_t kMaxChangesTried = 20000;
constexpr int64_t kMaxChangesListed = 4000000;
constexpr size_t kMaxSwapGroups = 1024;

// Every move of one group to another replica and every swap of two groups on different replicas
// (up to kMaxSwapGroups groups) where `involves` holds for one of the two replicas.
template <class Filter>
std::vector<Change> changes(const Deal& d, Filter involves) {
  std::vector<Change> out;
  const bool swaps = d.groups.size() <= kMaxSwapGroups;
  for (size_t g = 0; g < d.groups.size(); ++g) {
    const int from = d.replica[g];
    for (int to = 0; to < d.dp(); ++to) {
      if (to != from && (involves(from) || involves(to))) out.push_back({g, to, std::nullopt});
    }
    for (size_t h = g + 1; swaps && h < d.groups.size(); ++h) {
      const int to = d.replica[h];
      if (to != from && (involves(from) || involves(to))) out.push_back({g, to, h});
    }
  }
  return out;
}

// Where some replica has too few samples and whole groups for the common count, the change that
// lowers the shortfall most (then the slowest replica's load), until none is left. False when no
// change lowers it.
bool repair(Deal& d) {
  int64_t tried = 0;
  for (int64_t missing = shortfall(d); missing > 0;) {
    const int64_t k = common_k(d);
    const int64_t most = *std::max_element(d.packs.begin(), d.packs.end());
    // Replicas short of the count, and those whose packs set it.
    auto involves = [&](int r) {
      const auto q = static_cast<size_t>(r);
      return d.atoms[q] < k || d.packs[q] == most;
    };
    std::optional<Change> best;
    std::pair<int64_t, double> best_score{missing, std::numeric_limits<double>::infinity()};
    for (const Change& c : changes(d, involves)) {
      if (++tried > kMaxChangesTried) return false;
      const int from = d.replica[c.g];
      apply(d, c);
      const std::pair<int64_t, double> score{shortfall(d), slowest(d)};
      undo(d, c, from);
      if (score < best_score) {
        best_score = score;
        best = c;
      }
    }
    if (!best || best_score.first >= missing) return false;
    apply(d, *best);
    missing = best_score.first;
  }
  return true;
}

// Moves and swaps of groups that lower the slowest replica's load while the deal stays plannable,
// the largest drop first, until none does.
void refine(Deal& d) {
  int64_t tried = 0, listed = 0;
  while (tried < kMaxChangesTried && listed < kMaxChangesListed) {
    const auto s =
        static_cast<int>(std::max_element(d.load.begin(), d.load.end()) - d.load.begin());
    const double top = d.load[static_cast<size_t>(s)];
    std::vector<std::pair<double, Change>> better;
    const std::vector<Change> all = changes(d, [&](int r) { return r == s; });
    listed += static_cast<int64_t>(all.size());
    for (const Change& c : all) {
      const int from = d.replica[c.g];
      const int other = from == s ? c.to : from;
      double delta = d.groups[c.g].cost - (c.back ? d.groups[*c.back].cost : 0.0);
      if (from != s) delta = -delta;  // what s loses
      const double after = std::max(top - delta, d.load[static_cast<size_t>(other)] + delta);
      if (after < top) better.emplace_back(after, c);
    }
    std::stable_sort(better.begin(), better.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    bool improved = false;
    for (const auto& [after, c] : better) {
      if (++tried > kMaxChangesTried) break;
      const int from = d.replica[c.g];
      apply(d, c);
      if (shortfall(d) == 0) {
        improved = true;
        break;
      }
      undo(d, c, from);
    }
    if (!improved) return;
  }
}

// A replica's packs split until it has k (split_item_packs_to); the repair made every replica able
// to.
std::vector<std::vector<int64_t>> split_to(const Deal& d, std::vector<Pack> packs, int64_t k) {
  auto split = split_item_packs_to(std::move(packs), k, d.cost, d.in_run);
  check<InternalError>(static_cast<int64_t>(split.size()) == k,
                       "group deal: a repaired replica makes ", split.size(), " of ", k,
                       " micro-batches");
  return split;
}

// Each replica's packs split to the common count, with the slowest replica's cost.
GroupDeal finished(const Deal& d, std::span<const double> cost) {
  GroupDeal out;
  out.k = common_k(d);
  for (int r = 0; r < d.dp(); ++r) {
    out.replicas.push_back(split_to(d, replica_packs(d, r), out.k));
    // Summed afresh: the loads the changes kept up to date carry rounding.
    double load = 0;
    for (const auto& pack : out.replicas.back()) {
      for (int64_t p : pack) load += cost[static_cast<size_t>(p)];
    }
    out.slowest = std::max(out.slowest, load);
  }
  return out;
}

}  // namespace

std::optional<GroupDeal> deal_groups_longest_first(const ScheduleInput& input,
                                                   const ScheduleOptions& options,
                                                   std::span<const double> cost) {
  Deal start{input, options, cost, groups_of(input, options.capacity(), cost), {}, {}, {}, {}, {}};
  start.in_run.assign(input.ids.size(), 0);
  for (const Group& g : start.groups) {
    for (int64_t p : g.positions) start.in_run[static_cast<size_t>(p)] = g.big ? 1 : 0;
  }
  // Three starts, each refined: longest-first, differencing, and differencing with equal group
  // counts (the split verl's trainer makes); the lowest slowest replica is kept (longest-first on
  // ties, the deal the contract compares with). Only longest-first is repaired: differencing is
  // there for its balance, which a repair mostly undoes, and repairing it too made planning
  // several times slower.
  std::optional<Deal> best;
  for (const int how : {0, 1, 2}) {
    if (how == 2 && start.groups.size() % static_cast<size_t>(start.dp()) != 0) continue;
    Deal d = start;
    how == 0 ? deal_longest_first(d) : deal_differencing(d, /*equal_count=*/how == 2);
    if (how == 0 ? !repair(d) : shortfall(d) > 0) continue;
    refine(d);
    if (!best || slowest(d) < slowest(*best)) best.emplace(std::move(d));
  }
  if (!best) return std::nullopt;
  return finished(*best, cost);
}

}  // namespace thdpack::detail
