// Assignment of a global micro-batch's samples to canonical groups (SPEC §8): the number of groups,
// which DP rank owns which groups and reads which positions, the home assignment, hand examples of
// count-capped longest-first and of the swap refinement, errors, heterogeneous module DP sizes,
// and a property test over 2000 random micro-batches for both methods.

#include <gtest/gtest.h>

#include "expect_throw.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/reorder.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;
using Costs = std::vector<double>;

AssignmentOptions with(AssignmentMethod method, int64_t max_swaps = 1000) {
  AssignmentOptions o;
  o.method = method;
  o.max_swaps = max_swaps;
  return o;
}

double max_group_cost(const GroupAssignment& a) {
  return a.group_cost.empty() ? 0.0 : *std::max_element(a.group_cost.begin(), a.group_cost.end());
}

int64_t samples_at_home(const GroupAssignment& a) {
  const auto b = static_cast<int64_t>(a.group_of.size());
  if (b == 0) return 0;
  const int64_t per = b / a.groups;
  int64_t stays = 0;
  for (int64_t p = 0; p < b; ++p) stays += a.group_of[static_cast<size_t>(p)] == p / per ? 1 : 0;
  return stays;
}

/// Every structural promise of GroupAssignment.
void expect_valid(const GroupAssignment& a, const Costs& costs, int64_t groups) {
  const auto b = static_cast<int64_t>(costs.size());
  ASSERT_EQ(a.groups, groups);
  ASSERT_EQ(static_cast<int64_t>(a.members.size()), groups);
  ASSERT_EQ(static_cast<int64_t>(a.group_cost.size()), groups);
  ASSERT_EQ(static_cast<int64_t>(a.group_of.size()), b);
  std::vector<int> seen(costs.size(), 0);
  double total = 0;
  for (double c : costs) total += c;
  const double tol = 1e-12 * std::max(1.0, total);
  for (int64_t g = 0; g < groups; ++g) {
    const I64& m = a.members[static_cast<size_t>(g)];
    ASSERT_EQ(static_cast<int64_t>(m.size()), b / groups) << "group " << g;
    ASSERT_TRUE(std::is_sorted(m.begin(), m.end()) &&
                std::adjacent_find(m.begin(), m.end()) == m.end())
        << "group " << g << " members not increasing";
    double sum = 0;
    for (int64_t p : m) {
      ASSERT_GE(p, 0);
      ASSERT_LT(p, b);
      ++seen[static_cast<size_t>(p)];
      sum += costs[static_cast<size_t>(p)];
      ASSERT_EQ(a.group_of[static_cast<size_t>(p)], g) << "position " << p;
    }
    ASSERT_NEAR(a.group_cost[static_cast<size_t>(g)], sum, tol) << "group " << g;
  }
  for (int64_t p = 0; p < b; ++p) {
    ASSERT_EQ(seen[static_cast<size_t>(p)], 1) << "position " << p;
  }
}

void expect_same(const GroupAssignment& x, const GroupAssignment& y) {
  EXPECT_EQ(x.groups, y.groups);
  EXPECT_EQ(x.members, y.members);
  EXPECT_EQ(x.group_cost, y.group_cost);  // bit-identical: every rank computes the same
  EXPECT_EQ(x.group_of, y.group_of);
}

// ---------------------------------------------------------------------------------------------
// Canonical groups, ownership, shards

TEST(AssignCanonicalGroups, LcmOfTheModuleDpSizes) {
  auto g = [](std::vector<int> sizes) { return canonical_groups(sizes); };
  EXPECT_EQ(g({2, 4}), 4);
  EXPECT_EQ(g({4, 2}), 4);
  EXPECT_EQ(g({2, 3}), 6);
  EXPECT_EQ(g({1}), 1);
  EXPECT_EQ(g({8}), 8);
  EXPECT_EQ(g({3, 3}), 3);
  EXPECT_EQ(g({4, 6}), 12);
  EXPECT_EQ(g({2, 3, 4}), 12);
  EXPECT_EQ(g({1, 1, 5}), 5);
}

TEST(AssignCanonicalGroups, EmptyOrNonPositiveSizesAreErrors) {
  EXPECT_THROW(canonical_groups(std::vector<int>{}), InvalidArgument);
  EXPECT_THROW(canonical_groups(std::vector<int>{0}), InvalidArgument);
  EXPECT_THROW(canonical_groups(std::vector<int>{2, 0}), InvalidArgument);
  EXPECT_THROW(canonical_groups(std::vector<int>{4, -2}), InvalidArgument);
}

TEST(AssignOwnership, OwnedGroupsAreContiguousBlocks) {
  EXPECT_EQ(owned_groups(4, 2, 0).begin, 0);
  EXPECT_EQ(owned_groups(4, 2, 0).end, 2);
  EXPECT_EQ(owned_groups(4, 2, 1).begin, 2);
  EXPECT_EQ(owned_groups(4, 2, 1).end, 4);
  EXPECT_EQ(owned_groups(6, 3, 2).begin, 4);
  EXPECT_EQ(owned_groups(6, 3, 2).end, 6);
  EXPECT_EQ(owned_groups(5, 1, 0).begin, 0);
  EXPECT_EQ(owned_groups(5, 1, 0).end, 5);
  for (int64_t groups = 1; groups <= 24; ++groups) {
    for (int dp = 1; dp <= groups; ++dp) {
      if (groups % dp != 0) continue;
      int64_t next = 0;
      for (int r = 0; r < dp; ++r) {
        const GroupRange range = owned_groups(groups, dp, r);
        EXPECT_EQ(range.begin, next) << groups << " groups, dp " << dp << ", rank " << r;
        EXPECT_EQ(range.end - range.begin, groups / dp);
        next = range.end;
      }
      EXPECT_EQ(next, groups);
    }
  }
}

TEST(AssignOwnership, GroupsNotAMultipleOfDpIsAnError) {
  EXPECT_THROW(owned_groups(6, 4, 0), InvalidArgument);
  EXPECT_THROW(owned_groups(4, 3, 1), InvalidArgument);
  EXPECT_THROW(owned_groups(1, 2, 0), InvalidArgument);
}

TEST(AssignOwnership, ShardPositionsAreContiguousBlocks) {
  for (int r = 0; r < 3; ++r) {
    const GroupRange s = shard_positions(12, 3, r);
    EXPECT_EQ(s.begin, 4 * r);
    EXPECT_EQ(s.end, 4 * r + 4);
  }
  EXPECT_EQ(shard_positions(8, 1, 0).begin, 0);
  EXPECT_EQ(shard_positions(8, 1, 0).end, 8);
  for (int dp = 1; dp <= 8; ++dp) {
    for (int64_t per = 1; per <= 5; ++per) {
      const int64_t b = per * dp;
      int64_t next = 0;
      for (int r = 0; r < dp; ++r) {
        const GroupRange s = shard_positions(b, dp, r);
        EXPECT_EQ(s.begin, next);
        EXPECT_EQ(s.end - s.begin, per);
        next = s.end;
      }
      EXPECT_EQ(next, b);
    }
  }
}

TEST(AssignOwnership, ShardsAreTheHomesOfTheOwnedGroups) {
  // Without reordering a rank holds exactly the home groups it owns: position p of its shard has
  // home group p / (B/G) inside owned_groups.
  for (int64_t groups : {1, 2, 4, 6, 12}) {
    for (int dp = 1; dp <= static_cast<int>(groups); ++dp) {
      if (groups % dp != 0) continue;
      const int64_t b = groups * 3;
      const int64_t per_group = b / groups;
      for (int r = 0; r < dp; ++r) {
        const GroupRange shard = shard_positions(b, dp, r);
        const GroupRange owned = owned_groups(groups, dp, r);
        EXPECT_EQ(shard.begin / per_group, owned.begin);
        EXPECT_EQ(shard.end / per_group, owned.end);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Home assignment and hand examples

TEST(AssignHome, MovesNothing) {
  const Costs costs = {5, 1, 3, 2, 8, 0};
  const GroupAssignment a = home_assignment(costs, 3);
  expect_valid(a, costs, 3);
  EXPECT_EQ(a.members, (std::vector<I64>{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(a.group_cost, (Costs{6, 5, 8}));
  EXPECT_EQ(a.group_of, (I64{0, 0, 1, 1, 2, 2}));
  const GroupAssignment one = home_assignment(costs, 1);
  EXPECT_EQ(one.members, (std::vector<I64>{{0, 1, 2, 3, 4, 5}}));
  EXPECT_EQ(one.group_cost, (Costs{19}));
  const GroupAssignment six = home_assignment(costs, 6);
  EXPECT_EQ(six.group_of, (I64{0, 1, 2, 3, 4, 5}));
}

TEST(AssignLongestFirst, HandExample) {
  // B = 8, G = 4, two per group. Positions:  0  1  2  3  4  5  6  7
  //                                   cost:  5  9  2  9  4  7  1  3
  // Decreasing cost, ties by position: 1(9) 3(9) 5(7) 0(5) 4(4) 7(3) 2(2) 6(1).
  //   1 -> g0 (all 0, lowest index)          g = [9, 0, 0, 0]
  //   3 -> g1 (cheapest 0, lowest index)     g = [9, 9, 0, 0]
  //   5 -> g2                                g = [9, 9, 7, 0]
  //   0 -> g3                                g = [9, 9, 7, 5]
  //   4 -> g3 (5 is cheapest); g3 full       g = [9, 9, 7, 9]
  //   7 -> g2 (7 is cheapest); g2 full       g = [9, 9, 10, 9]
  //   2 -> g0 (9 ties with g1: lowest index) g = [11, 9, 10, 9]; g0 full
  //   6 -> g1 (the only one with room)       g = [11, 10, 10, 9]
  const Costs costs = {5, 9, 2, 9, 4, 7, 1, 3};
  const GroupAssignment a = assign_groups(costs, 4, with(AssignmentMethod::kLongestFirst));
  expect_valid(a, costs, 4);
  EXPECT_EQ(a.members, (std::vector<I64>{{1, 2}, {3, 6}, {5, 7}, {0, 4}}));
  EXPECT_EQ(a.group_cost, (Costs{11, 10, 10, 9}));
  EXPECT_EQ(a.group_of, (I64{3, 0, 0, 1, 3, 2, 1, 2}));
}

TEST(AssignLongestFirst, EqualCostsAlternate) {
  // All equal: positions in order, each into the cheapest group with room, ties to the lowest
  // index: 0 -> g0, 1 -> g1, 2 -> g0 (tie), 3 -> g1.
  const Costs costs = {2, 2, 2, 2};
  const GroupAssignment a = assign_groups(costs, 2, with(AssignmentMethod::kLongestFirst));
  EXPECT_EQ(a.members, (std::vector<I64>{{0, 2}, {1, 3}}));
  // All zero: g0 stays cheapest-with-lowest-index until full, which is the home assignment.
  const Costs zeros(6, 0.0);
  const GroupAssignment z = assign_groups(zeros, 3, with(AssignmentMethod::kLongestFirst));
  EXPECT_EQ(z.members, (std::vector<I64>{{0, 1}, {2, 3}, {4, 5}}));
}

TEST(AssignRefined, SwapFixesWhatLongestFirstLeaves) {
  // Positions 0..5, costs 3 2 3 2 2 0, G = 2 (three per group).
  // Longest-first: 0(3)->g0, 2(3)->g1, 1(2)->g0 (tie), 3(2)->g1, 4(2)->g0 (tie, g0 full),
  // 5(0)->g1: g0 = {0,1,4} = 7, g1 = {2,3,5} = 5.
  // The only swap lowering the maximum trades 0 (3) for 3 (2): {1,3,4} = 6 and {0,2,5} = 6, the
  // only partition with maximum 6. Home ({0,1,2} = 8) is worse. Labelled towards home,
  // {0,2,5} keeps two samples in g0 and {1,3,4} two in g1.
  const Costs costs = {3, 2, 3, 2, 2, 0};
  const GroupAssignment lpt = assign_groups(costs, 2, with(AssignmentMethod::kLongestFirst));
  EXPECT_EQ(lpt.members, (std::vector<I64>{{0, 1, 4}, {2, 3, 5}}));
  EXPECT_EQ(lpt.group_cost, (Costs{7, 5}));
  const GroupAssignment refined = assign_groups(costs, 2, with(AssignmentMethod::kRefined));
  expect_valid(refined, costs, 2);
  EXPECT_EQ(refined.members, (std::vector<I64>{{0, 2, 5}, {1, 3, 4}}));
  EXPECT_EQ(refined.group_cost, (Costs{6, 6}));
  // With no refinement steps the result is longest-first's balance (relabelled) or better.
  const GroupAssignment capped = assign_groups(costs, 2, with(AssignmentMethod::kRefined, 0));
  expect_valid(capped, costs, 2);
  EXPECT_LE(max_group_cost(capped), 7.0);
}

TEST(AssignRefined, BalancedHomeStaysInPlace) {
  // Home {4,1,1} = 6 and {2,2,2} = 6 is perfectly balanced while longest-first gives 7 / 5.
  const Costs costs = {4, 1, 1, 2, 2, 2};
  const GroupAssignment lpt = assign_groups(costs, 2, with(AssignmentMethod::kLongestFirst));
  EXPECT_EQ(max_group_cost(lpt), 7.0);
  const GroupAssignment refined = assign_groups(costs, 2, with(AssignmentMethod::kRefined));
  EXPECT_EQ(refined.members, (std::vector<I64>{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(samples_at_home(refined), 6);
}

TEST(AssignRefined, UniformCostsMoveNothing) {
  for (double c : {0.0, 1.0, 3.5}) {
    for (int64_t groups : {1, 2, 3, 4, 8}) {
      const Costs costs(static_cast<size_t>(groups * 5), c);
      const GroupAssignment refined = assign_groups(costs, groups, {});  // default: kRefined
      const GroupAssignment home = home_assignment(costs, groups);
      EXPECT_EQ(refined.members, home.members) << "cost " << c << ", " << groups << " groups";
      EXPECT_EQ(refined.group_of, home.group_of);
    }
  }
}

TEST(AssignGroupsEdge, EmptyMicrobatchAndOneGroup) {
  for (auto method : {AssignmentMethod::kLongestFirst, AssignmentMethod::kRefined}) {
    const GroupAssignment empty = assign_groups(Costs{}, 3, with(method));
    expect_valid(empty, Costs{}, 3);
    const Costs costs = {4, 0, 7};
    const GroupAssignment one = assign_groups(costs, 1, with(method));
    expect_valid(one, costs, 1);
    EXPECT_EQ(one.members, (std::vector<I64>{{0, 1, 2}}));
    const GroupAssignment each = assign_groups(costs, 3, with(method));
    expect_valid(each, costs, 3);
  }
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(AssignGroupsErrors, MicrobatchNotAMultipleOfGroups) {
  for (auto method : {AssignmentMethod::kLongestFirst, AssignmentMethod::kRefined}) {
    const Costs ten(10, 1.0);
    test_util::expect_throw_with<InvalidArgument>([&] { assign_groups(ten, 4, with(method)); },
                                                  {"10", "4"});
    const Costs seven(7, 1.0);
    test_util::expect_throw_with<InvalidArgument>([&] { assign_groups(seven, 6, with(method)); },
                                                  {"7", "6"});
  }
}

TEST(AssignGroupsErrors, GroupsBelowOne) {
  const Costs costs(4, 1.0);
  for (auto method : {AssignmentMethod::kLongestFirst, AssignmentMethod::kRefined}) {
    EXPECT_THROW(assign_groups(costs, 0, with(method)), InvalidArgument);
    EXPECT_THROW(assign_groups(costs, -2, with(method)), InvalidArgument);
  }
}

TEST(AssignGroupsErrors, NegativeOrNonFiniteCosts) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (auto method : {AssignmentMethod::kLongestFirst, AssignmentMethod::kRefined}) {
    for (double bad : {-1.0, -1e-300, nan, inf, -inf}) {
      const Costs costs = {1, 2, bad, 4};
      EXPECT_THROW(assign_groups(costs, 2, with(method)), InvalidArgument) << bad;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Heterogeneous module DP sizes

/// Positions a rank of a module holds after reordering: the members of its groups.
std::set<int64_t> held(const GroupAssignment& a, int dp, int rank) {
  const GroupRange r = owned_groups(a.groups, dp, rank);
  std::set<int64_t> out;
  for (int64_t g = r.begin; g < r.end; ++g) {
    out.insert(a.members[static_cast<size_t>(g)].begin(), a.members[static_cast<size_t>(g)].end());
  }
  return out;
}

Costs random_costs(std::mt19937_64& rng, size_t n) {
  std::lognormal_distribution<double> dist(3.0, 1.2);
  Costs c(n);
  for (auto& x : c) x = std::floor(dist(rng));
  return c;
}

TEST(AssignModules, VisionDp2ServesLanguageDp4) {
  const int64_t groups = canonical_groups(std::vector<int>{2, 4});
  ASSERT_EQ(groups, 4);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(owned_groups(groups, 2, r).begin, owned_groups(groups, 4, 2 * r).begin);
    EXPECT_EQ(owned_groups(groups, 4, 2 * r).end, owned_groups(groups, 4, 2 * r + 1).begin);
    EXPECT_EQ(owned_groups(groups, 2, r).end, owned_groups(groups, 4, 2 * r + 1).end);
  }
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    const Costs costs = random_costs(rng, 24);
    // Each module computes the assignment on its own, from the same costs.
    const GroupAssignment vision = assign_groups(costs, groups, {});
    const GroupAssignment language = assign_groups(costs, groups, {});
    expect_same(vision, language);
    for (int r = 0; r < 2; ++r) {
      std::set<int64_t> served = held(language, 4, 2 * r);
      const std::set<int64_t> second = held(language, 4, 2 * r + 1);
      served.insert(second.begin(), second.end());
      EXPECT_EQ(held(vision, 2, r), served) << "vision rank " << r;
      EXPECT_EQ(held(vision, 2, r).size(), 12u);
    }
  }
}

TEST(AssignModules, VisionDp2AndLanguageDp3ShareSixGroups) {
  const int64_t groups = canonical_groups(std::vector<int>{2, 3});
  ASSERT_EQ(groups, 6);
  // Group g is served by vision rank g/3 and language rank g/2.
  const std::vector<std::pair<int, int>> expected = {{0, 0}, {0, 0}, {0, 1},
                                                     {1, 1}, {1, 2}, {1, 2}};
  for (int64_t g = 0; g < groups; ++g) {
    int vision_owner = -1;
    int language_owner = -1;
    for (int r = 0; r < 2; ++r) {
      const GroupRange o = owned_groups(groups, 2, r);
      if (g >= o.begin && g < o.end) vision_owner = r;
    }
    for (int r = 0; r < 3; ++r) {
      const GroupRange o = owned_groups(groups, 3, r);
      if (g >= o.begin && g < o.end) language_owner = r;
    }
    EXPECT_EQ(vision_owner, expected[static_cast<size_t>(g)].first) << "group " << g;
    EXPECT_EQ(language_owner, expected[static_cast<size_t>(g)].second) << "group " << g;
  }
  std::mt19937_64 rng(43);
  const Costs costs = random_costs(rng, 36);
  const GroupAssignment a = assign_groups(costs, groups, {});
  // Both modules hold every position once; vision rank 0 and language rank 1 share group 2.
  std::set<int64_t> vision_all = held(a, 2, 0);
  const std::set<int64_t> vision_1 = held(a, 2, 1);
  EXPECT_EQ(vision_all.size(), 18u);
  vision_all.insert(vision_1.begin(), vision_1.end());
  EXPECT_EQ(vision_all.size(), 36u);
  std::set<int64_t> shared;
  const std::set<int64_t> vision_0 = held(a, 2, 0);
  const std::set<int64_t> language_1 = held(a, 3, 1);
  std::set_intersection(vision_0.begin(), vision_0.end(), language_1.begin(), language_1.end(),
                        std::inserter(shared, shared.end()));
  EXPECT_EQ(shared, std::set<int64_t>(a.members[2].begin(), a.members[2].end()));
}

// ---------------------------------------------------------------------------------------------
// Property test

Costs random_case_costs(std::mt19937_64& rng, size_t n, int kind) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Costs c(n);
  switch (kind) {
    case 0:  // integers with ties
      for (auto& x : c) x = static_cast<double>(rng() % 101);
      break;
    case 1:  // continuous
      for (auto& x : c) x = unit(rng) * 1000.0;
      break;
    case 2:  // heavy tail (Pareto, alpha 1.1) with 30% zeros (text-only samples)
      for (auto& x : c) {
        x = unit(rng) < 0.3 ? 0.0 : std::floor(64.0 / std::pow(1.0 - unit(rng), 1.0 / 1.1));
      }
      break;
    case 3:  // all zero
      std::fill(c.begin(), c.end(), 0.0);
      break;
    case 4:  // all equal
      std::fill(c.begin(), c.end(), 16.0 * static_cast<double>(1 + rng() % 5));
      break;
    case 5:  // few distinct values
      for (auto& x : c) x = static_cast<double>(rng() % 4) * 256.0;
      break;
    default:  // one giant, the rest small
      for (auto& x : c) x = static_cast<double>(rng() % 10);
      c[rng() % n] = 1e6;
      break;
  }
  return c;
}

/// The most samples any relabelling of the groups keeps at home (brute force, small G).
int64_t best_home_count_over_relabellings(const GroupAssignment& a) {
  const auto b = static_cast<int64_t>(a.group_of.size());
  const int64_t per = b / a.groups;
  std::vector<int64_t> label(static_cast<size_t>(a.groups));
  std::iota(label.begin(), label.end(), 0);
  int64_t best = 0;
  do {
    int64_t stays = 0;
    for (int64_t p = 0; p < b; ++p) {
      stays += label[static_cast<size_t>(a.group_of[static_cast<size_t>(p)])] == p / per ? 1 : 0;
    }
    best = std::max(best, stays);
  } while (std::next_permutation(label.begin(), label.end()));
  return best;
}

struct RandomCase {
  int64_t groups = 1;
  int kind = 0;
  Costs costs;
};

/// 2000 random micro-batches: G in 1..8, B = G·(1..12), seven kinds of cost.
std::vector<RandomCase> random_cases() {
  std::mt19937_64 rng(0x5eed);
  std::vector<RandomCase> cases;
  for (int trial = 0; trial < 2000; ++trial) {
    RandomCase c;
    c.groups = 1 + static_cast<int64_t>(rng() % 8);
    const int64_t per = 1 + static_cast<int64_t>(rng() % 12);
    c.kind = static_cast<int>(rng() % 7);
    c.costs = random_case_costs(rng, static_cast<size_t>(c.groups * per), c.kind);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string describe(size_t trial, const RandomCase& c) {
  std::ostringstream out;
  out << "trial " << trial << ": G " << c.groups << ", kind " << c.kind << ", costs";
  for (double x : c.costs) out << ' ' << x;
  return out.str();
}

TEST(AssignGroupsProperty, RandomMicrobatches) {
  const std::vector<RandomCase> cases = random_cases();
  int refined_beat_lpt = 0;
  for (size_t trial = 0; trial < cases.size(); ++trial) {
    const Costs& costs = cases[trial].costs;
    const int64_t groups = cases[trial].groups;
    const int kind = cases[trial].kind;
    SCOPED_TRACE(describe(trial, cases[trial]));
    double total = 0;
    double largest = 0;
    for (double c : costs) {
      total += c;
      largest = std::max(largest, c);
    }
    const double tol = 1e-9 * std::max(1.0, total);

    const GroupAssignment home = home_assignment(costs, groups);
    ASSERT_NO_FATAL_FAILURE(expect_valid(home, costs, groups));
    ASSERT_EQ(samples_at_home(home), static_cast<int64_t>(costs.size()));

    const GroupAssignment lpt = assign_groups(costs, groups, with(AssignmentMethod::kLongestFirst));
    ASSERT_NO_FATAL_FAILURE(expect_valid(lpt, costs, groups));
    expect_same(lpt, assign_groups(costs, groups, with(AssignmentMethod::kLongestFirst)));

    const GroupAssignment refined = assign_groups(costs, groups, with(AssignmentMethod::kRefined));
    ASSERT_NO_FATAL_FAILURE(expect_valid(refined, costs, groups));
    expect_same(refined, assign_groups(costs, groups, with(AssignmentMethod::kRefined)));

    const GroupAssignment capped =
        assign_groups(costs, groups, with(AssignmentMethod::kRefined, 0));
    ASSERT_NO_FATAL_FAILURE(expect_valid(capped, costs, groups));

    // Balance: refined is never worse than longest-first or than not moving at all.
    EXPECT_LE(max_group_cost(refined), max_group_cost(lpt) + tol);
    EXPECT_LE(max_group_cost(refined), max_group_cost(home) + tol);
    EXPECT_LE(max_group_cost(capped), max_group_cost(lpt) + tol);
    EXPECT_LE(max_group_cost(capped), max_group_cost(home) + tol);
    if (max_group_cost(refined) < max_group_cost(lpt) - tol) ++refined_beat_lpt;
    if (groups == 2) {
      EXPECT_LE(std::abs(lpt.group_cost[0] - lpt.group_cost[1]), largest + tol);
      EXPECT_LE(std::abs(refined.group_cost[0] - refined.group_cost[1]), largest + tol);
    }
    // Uniform costs: nothing moves.
    if (kind == 3 || kind == 4) {
      EXPECT_EQ(refined.members, home.members);
    }
  }
  // The refinement does something on these inputs.
  EXPECT_GT(refined_beat_lpt, 50);
}

/// A sample away from home whose home group holds an equal-cost sample that is away from home
/// too: swapping them keeps every group cost and brings at least one more sample home.
bool has_equal_cost_swap_home(const GroupAssignment& a, const Costs& costs, std::string& which) {
  const int64_t per = static_cast<int64_t>(costs.size()) / a.groups;
  for (int64_t g = 0; g < a.groups; ++g) {
    for (int64_t p : a.members[static_cast<size_t>(g)]) {
      const int64_t h = p / per;
      if (h == g) continue;
      for (int64_t q : a.members[static_cast<size_t>(h)]) {
        if (q / per != h && costs[static_cast<size_t>(q)] == costs[static_cast<size_t>(p)]) {
          std::ostringstream out;
          out << "positions " << p << " (in group " << g << ") and " << q << " (in group " << h
              << ")";
          which = out.str();
          return true;
        }
      }
    }
  }
  return false;
}

TEST(AssignRefinedMoves, EqualCostSamplesAreSwappedHome) {
  // B = 8, G = 4, homes {0,1} {2,3} {4,5} {6,7}; costs 3 0 2 3 0 0 0 1.
  // The best maximum is 3 (a sample costs 3). Home g1 = {2,3} costs 5, so one of 2 and 3 must
  // leave and another sample take its place: at least 2 moves, e.g. g0 {0,1} = 3, g1 {3,5} = 3,
  // g2 {2,4} = 2, g3 {6,7} = 1 (5 and 2 move). Six samples stay home.
  const Costs costs = {3, 0, 2, 3, 0, 0, 0, 1};
  const GroupAssignment a = assign_groups(costs, 4, with(AssignmentMethod::kRefined));
  expect_valid(a, costs, 4);
  EXPECT_EQ(max_group_cost(a), 3.0);
  EXPECT_EQ(samples_at_home(a), 6);
  std::string which;
  EXPECT_FALSE(has_equal_cost_swap_home(a, costs, which)) << which;
}

TEST(AssignRefinedMoves, NoRelabellingOrEqualCostSwapKeepsMoreHome) {
  // "Groups relabelled (and equal-cost samples swapped back) so that as few samples move as
  // possible": neither another labelling of the groups nor a swap of two equal-cost samples
  // brings more samples home.
  const std::vector<RandomCase> cases = random_cases();
  int relabel_failures = 0;
  int swap_failures = 0;
  for (size_t trial = 0; trial < cases.size(); ++trial) {
    const RandomCase& c = cases[trial];
    const GroupAssignment a = assign_groups(c.costs, c.groups, with(AssignmentMethod::kRefined));
    if (c.groups <= 5 && samples_at_home(a) != best_home_count_over_relabellings(a)) {
      if (++relabel_failures <= 3) {
        ADD_FAILURE() << describe(trial, c) << ": " << samples_at_home(a)
                      << " samples at home, another labelling keeps "
                      << best_home_count_over_relabellings(a);
      }
    }
    std::string which;
    if (has_equal_cost_swap_home(a, c.costs, which)) {
      if (++swap_failures <= 3) {
        ADD_FAILURE() << describe(trial, c) << ": " << which
                      << " have equal costs and could be swapped home";
      }
    }
  }
  EXPECT_EQ(relabel_failures, 0);
  EXPECT_EQ(swap_failures, 0);
}

}  // namespace
}  // namespace thdpack
