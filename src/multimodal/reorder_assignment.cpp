// Balanced assignment of a global micro-batch's samples to canonical groups (reorder.hpp).

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/reorder.hpp"

namespace thdpack {
namespace {

/// Groups as member lists; costs and group_of derived by finish().
struct Groups {
  std::vector<std::vector<int64_t>> members;
  std::vector<double> cost;
};

void check_assignment_input(std::span<const double> costs, int64_t groups) {
  check(groups >= 1, "the number of canonical groups must be >= 1, got ", groups);
  const auto b = static_cast<int64_t>(costs.size());
  check(b % groups == 0, "the micro-batch size ", b,
        " is not a multiple of the number of canonical groups ", groups,
        " (the lcm of the module DP sizes); use a multiple of it");
  for (size_t p = 0; p < costs.size(); ++p) {
    if (!std::isfinite(costs[p]) || costs[p] < 0) {
      fail("sample cost at position ", p, " must be finite and >= 0, got ",
           std::to_string(costs[p]));
    }
  }
}

/// Sorts members, sums costs in position order (the same order on every rank) and fills group_of.
GroupAssignment finish(std::vector<std::vector<int64_t>> members, std::span<const double> costs) {
  GroupAssignment a;
  a.groups = static_cast<int64_t>(members.size());
  a.group_cost.assign(members.size(), 0.0);
  a.group_of.assign(costs.size(), -1);
  for (size_t g = 0; g < members.size(); ++g) {
    std::sort(members[g].begin(), members[g].end());
    for (int64_t p : members[g]) {
      a.group_cost[g] += costs[static_cast<size_t>(p)];
      a.group_of[static_cast<size_t>(p)] = static_cast<int64_t>(g);
    }
  }
  a.members = std::move(members);
  return a;
}

double max_cost(const GroupAssignment& a) {
  return a.group_cost.empty() ? 0.0 : *std::max_element(a.group_cost.begin(), a.group_cost.end());
}

/// Count-capped longest-first: decreasing cost (ties by position), each into the cheapest group
/// with room (ties by group index).
Groups longest_first(std::span<const double> costs, int64_t groups) {
  const auto b = static_cast<int64_t>(costs.size());
  const int64_t per_group = b / groups;
  std::vector<int64_t> order(static_cast<size_t>(b));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return costs[static_cast<size_t>(x)] > costs[static_cast<size_t>(y)];
  });
  Groups out;
  out.members.resize(static_cast<size_t>(groups));
  out.cost.assign(static_cast<size_t>(groups), 0.0);
  for (int64_t p : order) {
    size_t best = out.members.size();
    for (size_t g = 0; g < out.members.size(); ++g) {
      if (static_cast<int64_t>(out.members[g].size()) == per_group) continue;
      if (best == out.members.size() || out.cost[g] < out.cost[best]) best = g;
    }
    out.members[best].push_back(p);
    out.cost[best] += costs[static_cast<size_t>(p)];
  }
  return out;
}

/// The best swap between the costliest group and one other: the pair (a from the costliest, b
/// from the other) whose exchange minimises the larger of the two new sums, if that is below the
/// costliest sum. Ties go to the lowest group, then the first pair found.
struct Swap {
  size_t other = 0;
  size_t a_index = 0;  ///< into members[costliest]
  size_t b_index = 0;  ///< into members[other]
  double new_max = 0;
};

bool find_best_swap(const Groups& g, size_t costliest, std::span<const double> costs, Swap& best) {
  const double top = g.cost[costliest];
  const double tolerance = 1e-12 * std::max(1.0, top);
  bool found = false;
  std::vector<std::pair<double, size_t>> sorted;  // (cost, index into members[other])
  for (size_t other = 0; other < g.members.size(); ++other) {
    const double gap = top - g.cost[other];
    if (other == costliest || gap <= tolerance) continue;
    sorted.clear();
    for (size_t j = 0; j < g.members[other].size(); ++j) {
      sorted.emplace_back(costs[static_cast<size_t>(g.members[other][j])], j);
    }
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < g.members[costliest].size(); ++i) {
      const double ca = costs[static_cast<size_t>(g.members[costliest][i])];
      // The ideal partner costs ca - gap/2; check its neighbours in sorted order.
      const auto at =
          std::lower_bound(sorted.begin(), sorted.end(), std::make_pair(ca - gap / 2, size_t{0}));
      for (auto it : {at, at == sorted.begin() ? sorted.end() : at - 1}) {
        if (it == sorted.end()) continue;
        const double d = ca - it->first;
        if (d <= 0 || d >= gap) continue;
        const double new_max = std::max(top - d, g.cost[other] + d);
        if (new_max < top - tolerance && (!found || new_max < best.new_max - tolerance)) {
          best = Swap{other, i, it->second, new_max};
          found = true;
        }
      }
    }
  }
  return found;
}

/// Pairwise swaps with the costliest group while they lower it. Each swap strictly lowers the sum
/// of squared group costs, so this ends; max_swaps bounds it anyway.
void refine(Groups& g, std::span<const double> costs, int64_t max_swaps) {
  for (int64_t step = 0; step < max_swaps; ++step) {
    const auto costliest =
        static_cast<size_t>(std::max_element(g.cost.begin(), g.cost.end()) - g.cost.begin());
    Swap s;
    if (!find_best_swap(g, costliest, costs, s)) return;
    int64_t& a = g.members[costliest][s.a_index];
    int64_t& b = g.members[s.other][s.b_index];
    const double d = costs[static_cast<size_t>(a)] - costs[static_cast<size_t>(b)];
    g.cost[costliest] -= d;
    g.cost[s.other] += d;
    std::swap(a, b);
  }
}

/// Relabels groups (a permutation: balance is unchanged) to maximise the samples that stay in
/// their home group: an assignment problem on the G x G overlap counts, solved exactly with the
/// Hungarian method (O(G^3); G is the lcm of the DP sizes).
std::vector<std::vector<int64_t>> relabel_towards_home(std::vector<std::vector<int64_t>> members,
                                                       int64_t per_group) {
  const size_t n = members.size();
  if (n <= 1 || per_group == 0) return members;
  // loss[g][l]: samples of group g that would not be home under label l.
  std::vector<std::vector<int64_t>> loss(n + 1, std::vector<int64_t>(n + 1, 0));
  for (size_t g = 0; g < n; ++g) {
    for (size_t l = 0; l < n; ++l) loss[g + 1][l + 1] = per_group;
    for (int64_t p : members[g]) --loss[g + 1][static_cast<size_t>(p / per_group) + 1];
  }
  // Hungarian method, rows = groups, columns = labels (1-based, potentials u, v).
  const int64_t inf = std::numeric_limits<int64_t>::max() / 4;
  std::vector<int64_t> u(n + 1, 0), v(n + 1, 0);
  std::vector<size_t> row_of_col(n + 1, 0), way(n + 1, 0);
  for (size_t row = 1; row <= n; ++row) {
    row_of_col[0] = row;
    size_t col0 = 0;
    std::vector<int64_t> min_v(n + 1, inf);
    std::vector<bool> used(n + 1, false);
    do {
      used[col0] = true;
      const size_t row0 = row_of_col[col0];
      int64_t delta = inf;
      size_t col1 = 0;
      for (size_t col = 1; col <= n; ++col) {
        if (used[col]) continue;
        const int64_t reduced = loss[row0][col] - u[row0] - v[col];
        if (reduced < min_v[col]) {
          min_v[col] = reduced;
          way[col] = col0;
        }
        if (min_v[col] < delta) {
          delta = min_v[col];
          col1 = col;
        }
      }
      for (size_t col = 0; col <= n; ++col) {
        if (used[col]) {
          u[row_of_col[col]] += delta;
          v[col] -= delta;
        } else {
          min_v[col] -= delta;
        }
      }
      col0 = col1;
    } while (row_of_col[col0] != 0);
    do {
      const size_t col1 = way[col0];
      row_of_col[col0] = row_of_col[col1];
      col0 = col1;
    } while (col0 != 0);
  }
  std::vector<std::vector<int64_t>> relabelled(n);
  for (size_t col = 1; col <= n; ++col)
    relabelled[col - 1] = std::move(members[row_of_col[col] - 1]);
  return relabelled;
}

/// Swaps a sample away from home with an equal-cost sample in its home group that is away from
/// its own home too: costs stay, one more sample (two when they trade homes) stays local.
void swap_equal_costs_home(std::vector<std::vector<int64_t>>& members,
                           std::span<const double> costs, int64_t per_group) {
  if (per_group == 0) return;
  for (size_t g = 0; g < members.size(); ++g) {
    for (int64_t& p : members[g]) {
      const auto home = static_cast<size_t>(p / per_group);
      if (home == g) continue;
      int64_t* partner = nullptr;
      for (int64_t& q : members[home]) {
        const auto q_home = static_cast<size_t>(q / per_group);
        if (q_home == home || costs[static_cast<size_t>(q)] != costs[static_cast<size_t>(p)]) {
          continue;
        }
        if (partner == nullptr || q_home == g) partner = &q;
        if (q_home == g) break;
      }
      if (partner != nullptr) std::swap(p, *partner);
    }
  }
}

int64_t samples_at_home(const std::vector<std::vector<int64_t>>& members, int64_t per_group) {
  int64_t n = 0;
  for (size_t g = 0; g < members.size(); ++g) {
    for (int64_t p : members[g]) n += static_cast<size_t>(p / per_group) == g ? 1 : 0;
  }
  return n;
}

/// Rank `rank`'s block of `total` items split evenly over `dp` ranks; `what` names the total.
GroupRange rank_block(int64_t total, int dp, int rank, const std::string& what) {
  if (dp < 1 || total < 0 || total % dp != 0) {
    fail(what, " ", total, " must be a multiple of the DP size ", dp);
  }
  if (rank < 0 || rank >= dp) fail("DP rank ", rank, " is outside [0, ", dp, ")");
  const int64_t per_rank = total / dp;
  return {rank * per_rank, (rank + 1) * per_rank};
}

}  // namespace

int64_t canonical_groups(std::span<const int> module_dp_sizes) {
  if (module_dp_sizes.empty()) {
    throw InvalidArgument("canonical groups need at least one module DP size");
  }
  int64_t g = 1;
  for (int d : module_dp_sizes) {
    check(d >= 1, "module DP sizes must be >= 1, got ", d);
    g = std::lcm(g, int64_t{d});
    if (g > (int64_t{1} << 30)) {
      throw InvalidArgument("the lcm of the module DP sizes is too large");
    }
  }
  return g;
}

GroupRange owned_groups(int64_t groups, int dp, int rank) {
  check(groups >= 1, "the number of canonical groups must be >= 1, got ", groups);
  return rank_block(groups, dp, rank, "the number of canonical groups");
}

GroupRange shard_positions(int64_t microbatch_size, int dp, int rank) {
  return rank_block(microbatch_size, dp, rank, "the micro-batch size");
}

GroupAssignment home_assignment(std::span<const double> costs, int64_t groups) {
  check_assignment_input(costs, groups);
  const int64_t per_group = static_cast<int64_t>(costs.size()) / groups;
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(groups));
  for (int64_t p = 0; p < static_cast<int64_t>(costs.size()); ++p) {
    members[static_cast<size_t>(p / per_group)].push_back(p);
  }
  return finish(std::move(members), costs);
}

GroupAssignment assign_groups(std::span<const double> costs, int64_t groups,
                              const AssignmentOptions& options) {
  check_assignment_input(costs, groups);
  check(options.max_swaps >= 0, "max_swaps must be >= 0, got ", options.max_swaps);
  Groups g = longest_first(costs, groups);
  if (options.method == AssignmentMethod::kLongestFirst) return finish(std::move(g.members), costs);

  refine(g, costs, options.max_swaps);
  const int64_t per_group = static_cast<int64_t>(costs.size()) / groups;
  GroupAssignment refined = finish(std::move(g.members), costs);
  GroupAssignment home = home_assignment(costs, groups);
  if (max_cost(home) <= max_cost(refined)) return home;
  // Relabelling and equal-cost swaps each keep more samples home and can enable one another:
  // alternate until neither gains (each round gains at least one sample, so at most B rounds).
  auto members = std::move(refined.members);
  for (int64_t home_count = -1;;) {
    members = relabel_towards_home(std::move(members), per_group);
    swap_equal_costs_home(members, costs, per_group);
    const int64_t now = samples_at_home(members, per_group);
    if (now <= home_count) break;
    home_count = now;
  }
  return finish(std::move(members), costs);
}

}  // namespace thdpack
