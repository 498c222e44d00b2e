// Topology: rank <-> coordinates in Megatron's order, process groups, micro-batch multiple and
// validation (SPEC §1, §10; include/thdpack/core/topology.hpp).

#include "thdpack/core/topology.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

using test_util::expect_throw_with;

TopologyConfig make_config(int tp, int cp, int dp, int pp,
                           const std::string& order = "tp-cp-ep-dp-pp", int ep = 1) {
  TopologyConfig c;
  c.tp = tp;
  c.cp = cp;
  c.dp = dp;
  c.pp = pp;
  c.ep = ep;
  c.order = order;
  return c;
}

// Independent reference: split an order string into dimension names (ep dropped), fastest first.
std::vector<std::string> dims_of(const std::string& order) {
  std::vector<std::string> dims;
  std::stringstream in(order);
  std::string token;
  while (std::getline(in, token, '-')) {
    if (token != "ep") dims.push_back(token);
  }
  return dims;
}

int& field(Coordinates& c, const std::string& dim) {
  if (dim == "tp") return c.tp;
  if (dim == "cp") return c.cp;
  if (dim == "dp") return c.dp;
  return c.pp;
}

int size_of(const TopologyConfig& cfg, const std::string& dim) {
  if (dim == "tp") return cfg.tp;
  if (dim == "cp") return cfg.cp;
  if (dim == "dp") return cfg.dp;
  return cfg.pp;
}

// Mixed-radix decomposition with the first dimension of the order varying fastest.
Coordinates reference_coordinates(const TopologyConfig& cfg, int rank) {
  Coordinates c;
  for (const std::string& d : dims_of(cfg.order)) {
    field(c, d) = rank % size_of(cfg, d);
    rank /= size_of(cfg, d);
  }
  return c;
}

std::string str(const Coordinates& c) {
  return "(tp " + std::to_string(c.tp) + ", cp " + std::to_string(c.cp) + ", dp " +
         std::to_string(c.dp) + ", pp " + std::to_string(c.pp) + ")";
}

const std::vector<std::string> kOrders = {"tp-cp-ep-dp-pp", "tp-cp-dp-pp", "tp-dp-cp-pp",
                                          "cp-tp-dp-pp",    "pp-dp-cp-tp", "dp-ep-pp-tp-cp"};

const std::vector<GroupKind> kKinds = {GroupKind::kTp, GroupKind::kCp,   GroupKind::kDp,
                                       GroupKind::kPp, GroupKind::kDpCp, GroupKind::kEp};

std::string kind_name(GroupKind k) {
  switch (k) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kCp:
      return "cp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kDpCp:
      return "dp_cp";
    case GroupKind::kEp:
      return "ep";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Rank order

TEST(TopologyOrder, DefaultsAreMegatrons) {
  const Topology t;
  EXPECT_EQ(t.tp(), 1);
  EXPECT_EQ(t.cp(), 1);
  EXPECT_EQ(t.dp(), 1);
  EXPECT_EQ(t.pp(), 1);
  EXPECT_EQ(t.ep(), 1);
  EXPECT_EQ(t.vpp(), 1);
  EXPECT_EQ(t.world_size(), 1);
  EXPECT_EQ(t.config().order, "tp-cp-ep-dp-pp");
  EXPECT_EQ(t.coordinates(0), Coordinates{});
}

TEST(TopologyOrder, WorldSizeIsProductOfTpCpDpPp) {
  // ep does not enter the dense decomposition.
  const Topology t(make_config(2, 3, 4, 5, "tp-cp-ep-dp-pp", 6));
  EXPECT_EQ(t.world_size(), 2 * 3 * 4 * 5);
}

TEST(TopologyOrder, HandCheckedDefaultOrder) {
  const Topology t(make_config(2, 2, 2, 2));
  EXPECT_EQ(t.coordinates(0), (Coordinates{0, 0, 0, 0}));
  EXPECT_EQ(t.coordinates(1), (Coordinates{1, 0, 0, 0}));  // TP fastest
  EXPECT_EQ(t.coordinates(2), (Coordinates{0, 1, 0, 0}));  // then CP
  EXPECT_EQ(t.coordinates(4), (Coordinates{0, 0, 1, 0}));  // then DP
  EXPECT_EQ(t.coordinates(8), (Coordinates{0, 0, 0, 1}));  // PP slowest
  EXPECT_EQ(t.coordinates(5), (Coordinates{1, 0, 1, 0}));
  EXPECT_EQ(t.coordinates(15), (Coordinates{1, 1, 1, 1}));
  EXPECT_EQ(t.rank_of({1, 0, 1, 0}), 5);
  EXPECT_EQ(t.rank_of({0, 1, 1, 1}), 14);
}

TEST(TopologyOrder, HandCheckedUnevenSizes) {
  // tp 4, cp 1, dp 3, pp 2: rank = tp + 4·dp + 12·pp.
  const Topology t(make_config(4, 1, 3, 2));
  EXPECT_EQ(t.coordinates(7), (Coordinates{3, 0, 1, 0}));
  EXPECT_EQ(t.coordinates(13), (Coordinates{1, 0, 0, 1}));
  EXPECT_EQ(t.coordinates(23), (Coordinates{3, 0, 2, 1}));
  EXPECT_EQ(t.rank_of({2, 0, 2, 1}), 2 + 8 + 12);
}

TEST(TopologyOrder, HandCheckedTpDpCpPp) {
  // "tp-dp-cp-pp": DP varies before CP.
  const Topology t(make_config(2, 2, 2, 2, "tp-dp-cp-pp"));
  EXPECT_EQ(t.coordinates(2), (Coordinates{0, 0, 1, 0}));
  EXPECT_EQ(t.coordinates(4), (Coordinates{0, 1, 0, 0}));
  EXPECT_EQ(t.coordinates(5), (Coordinates{1, 1, 0, 0}));
  EXPECT_EQ(t.rank_of({1, 0, 1, 1}), 1 + 2 + 8);
}

TEST(TopologyOrder, HandCheckedCpTpDpPp) {
  // "cp-tp-dp-pp" with tp 2, cp 3, dp 2: rank = cp + 3·tp + 6·dp.
  const Topology t(make_config(2, 3, 2, 1, "cp-tp-dp-pp"));
  EXPECT_EQ(t.coordinates(1), (Coordinates{0, 1, 0, 0}));
  EXPECT_EQ(t.coordinates(3), (Coordinates{1, 0, 0, 0}));
  EXPECT_EQ(t.coordinates(7), (Coordinates{0, 1, 1, 0}));
  EXPECT_EQ(t.coordinates(11), (Coordinates{1, 2, 1, 0}));
  EXPECT_EQ(t.rank_of({1, 2, 0, 0}), 5);
}

TEST(TopologyOrder, EpMayBeOmittedFromTheOrder) {
  const Topology with_ep(make_config(2, 3, 2, 2, "tp-cp-ep-dp-pp"));
  const Topology without_ep(make_config(2, 3, 2, 2, "tp-cp-dp-pp"));
  for (int r = 0; r < with_ep.world_size(); ++r) {
    EXPECT_EQ(with_ep.coordinates(r), without_ep.coordinates(r)) << "rank " << r;
  }
}

TEST(TopologyOrder, RoundTripManySizesAndOrders) {
  const std::vector<int> sizes = {1, 2, 3, 4};
  int checked = 0;
  for (const std::string& order : kOrders) {
    for (int tp : sizes) {
      for (int cp : sizes) {
        for (int dp : sizes) {
          for (int pp : {1, 2, 3}) {
            const TopologyConfig cfg = make_config(tp, cp, dp, pp, order);
            const Topology t(cfg);
            ASSERT_EQ(t.world_size(), tp * cp * dp * pp);
            std::set<int> seen;
            for (int r = 0; r < t.world_size(); ++r) {
              const Coordinates c = t.coordinates(r);
              ASSERT_EQ(c, reference_coordinates(cfg, r))
                  << order << " tp" << tp << " cp" << cp << " dp" << dp << " pp" << pp << " rank "
                  << r << " got " << str(c);
              ASSERT_EQ(t.rank_of(c), r);
              seen.insert(r);
              ++checked;
            }
            ASSERT_EQ(static_cast<int>(seen.size()), t.world_size());
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

TEST(TopologyOrder, RankOfIsABijectionOntoTheWorld) {
  const Topology t(make_config(3, 2, 4, 2, "pp-dp-cp-tp"));
  std::set<int> ranks;
  for (int tp = 0; tp < 3; ++tp) {
    for (int cp = 0; cp < 2; ++cp) {
      for (int dp = 0; dp < 4; ++dp) {
        for (int pp = 0; pp < 2; ++pp) {
          const int r = t.rank_of({tp, cp, dp, pp});
          ASSERT_GE(r, 0);
          ASSERT_LT(r, t.world_size());
          ranks.insert(r);
          EXPECT_EQ(t.coordinates(r), (Coordinates{tp, cp, dp, pp}));
        }
      }
    }
  }
  EXPECT_EQ(static_cast<int>(ranks.size()), t.world_size());
}

TEST(TopologyOrder, DescribeNamesSizesAndOrder) {
  const Topology t(make_config(2, 1, 4, 1));
  EXPECT_EQ(t.describe(), "tp=2 cp=1 dp=4 pp=1 (order tp-cp-ep-dp-pp)");
}

// ---------------------------------------------------------------------------------------------
// Groups

TEST(TopologyGroups, HandCheckedDefaultOrder) {
  // tp2 cp2 dp2 pp2; rank 5 = (tp 1, cp 0, dp 1, pp 0).
  const Topology t(make_config(2, 2, 2, 2));
  EXPECT_EQ(t.group_ranks(GroupKind::kTp, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(t.group_ranks(GroupKind::kCp, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(t.group_ranks(GroupKind::kDp, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(t.group_ranks(GroupKind::kPp, 5), (std::vector<int>{5, 13}));
  // dp_cp: cp fastest: (cp0,dp0), (cp1,dp0), (cp0,dp1), (cp1,dp1) at tp 1, pp 0.
  EXPECT_EQ(t.group_ranks(GroupKind::kDpCp, 5), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(t.group_rank(GroupKind::kTp, 5), 1);
  EXPECT_EQ(t.group_rank(GroupKind::kCp, 5), 0);
  EXPECT_EQ(t.group_rank(GroupKind::kDp, 5), 1);
  EXPECT_EQ(t.group_rank(GroupKind::kPp, 5), 0);
  EXPECT_EQ(t.group_rank(GroupKind::kDpCp, 5), 2);
  EXPECT_EQ(t.group_ranks(GroupKind::kEp, 5), (std::vector<int>{5}));  // ep 1
  EXPECT_EQ(t.all_groups(GroupKind::kTp),
            (std::vector<std::vector<int>>{
                {0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(t.all_groups(GroupKind::kPp),
            (std::vector<std::vector<int>>{
                {0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_EQ(t.all_groups(GroupKind::kDpCp),
            (std::vector<std::vector<int>>{
                {0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
}

TEST(TopologyGroups, DpCpIsCpFastestEvenWhenDpPrecedesCpInTheOrder) {
  // "tp-dp-cp-pp", tp 1, cp 2, dp 3: rank = dp + 3·cp. dp_cp group rank i = (cp i%2, dp i/2).
  const Topology t(make_config(1, 2, 3, 1, "tp-dp-cp-pp"));
  EXPECT_EQ(t.group_ranks(GroupKind::kDpCp, 0), (std::vector<int>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(t.group_rank(GroupKind::kDpCp, 3), 1);
  EXPECT_EQ(t.group_rank(GroupKind::kDpCp, 1), 2);
  EXPECT_EQ(t.group_ranks(GroupKind::kCp, 1), (std::vector<int>{1, 4}));
  EXPECT_EQ(t.group_ranks(GroupKind::kDp, 4), (std::vector<int>{3, 4, 5}));
}

TEST(TopologyGroups, HandCheckedEpDefaultOrder) {
  // tp 1, cp 2, dp 4, ep 4: the dp×cp flat index equals the rank; groups of 4 consecutive.
  const Topology t(make_config(1, 2, 4, 1, "tp-cp-ep-dp-pp", 4));
  EXPECT_EQ(t.all_groups(GroupKind::kEp),
            (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(t.group_ranks(GroupKind::kEp, 6), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(t.group_rank(GroupKind::kEp, 6), 2);
}

TEST(TopologyGroups, HandCheckedEpWithTpAndPp) {
  // tp 2, cp 1, dp 4, pp 2, ep 2: flat dp×cp index = dp; ranks = tp + 2·dp + 8·pp.
  const Topology t(make_config(2, 1, 4, 2, "tp-cp-ep-dp-pp", 2));
  EXPECT_EQ(t.group_ranks(GroupKind::kEp, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(t.group_ranks(GroupKind::kEp, 5), (std::vector<int>{5, 7}));     // tp1 dp2 pp0
  EXPECT_EQ(t.group_ranks(GroupKind::kEp, 15), (std::vector<int>{13, 15}));  // tp1 dp3 pp1
  EXPECT_EQ(t.all_groups(GroupKind::kEp).size(), 8u);
}

TEST(TopologyGroups, HandCheckedEpNonDefaultOrder) {
  // "tp-dp-cp-pp", cp 2, dp 4, ep 2: rank = dp + 4·cp; flat = cp + 2·dp, so EP groups pair the
  // two CP ranks of one DP index.
  const Topology t(make_config(1, 2, 4, 1, "tp-dp-cp-pp", 2));
  EXPECT_EQ(t.all_groups(GroupKind::kEp),
            (std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(t.group_rank(GroupKind::kEp, 4), 1);
}

TEST(TopologyGroups, EpGroupSpanningCpAndDp) {
  // cp 2, dp 3, ep 3: flat positions {0,1,2} = (cp0 dp0),(cp1 dp0),(cp0 dp1) and {3,4,5}.
  const Topology t(make_config(1, 2, 3, 1, "tp-cp-ep-dp-pp", 3));
  EXPECT_EQ(t.all_groups(GroupKind::kEp), (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(t.group_ranks(GroupKind::kEp, 2), (std::vector<int>{0, 1, 2}));
}

struct GroupCase {
  int tp, cp, dp, pp, ep;
  std::string order;
};

void PrintTo(const GroupCase& c, std::ostream* os) {
  *os << "tp" << c.tp << " cp" << c.cp << " dp" << c.dp << " pp" << c.pp << " ep" << c.ep << " "
      << c.order;
}

class TopologyGroupsProperty : public ::testing::TestWithParam<GroupCase> {};

int expected_size(const Topology& t, GroupKind k) {
  switch (k) {
    case GroupKind::kTp:
      return t.tp();
    case GroupKind::kCp:
      return t.cp();
    case GroupKind::kDp:
      return t.dp();
    case GroupKind::kPp:
      return t.pp();
    case GroupKind::kDpCp:
      return t.dp() * t.cp();
    case GroupKind::kEp:
      return t.ep();
  }
  return 0;
}

// The coordinates member `i` of `me`'s group of kind `k` must have.
Coordinates expected_member(const Topology& t, GroupKind k, const Coordinates& me, int i) {
  Coordinates c = me;
  switch (k) {
    case GroupKind::kTp:
      c.tp = i;
      break;
    case GroupKind::kCp:
      c.cp = i;
      break;
    case GroupKind::kDp:
      c.dp = i;
      break;
    case GroupKind::kPp:
      c.pp = i;
      break;
    case GroupKind::kDpCp:
      c.cp = i % t.cp();
      c.dp = i / t.cp();
      break;
    case GroupKind::kEp: {
      const int flat = (me.cp + t.cp() * me.dp) / t.ep() * t.ep() + i;
      c.cp = flat % t.cp();
      c.dp = flat / t.cp();
      break;
    }
  }
  return c;
}

TEST_P(TopologyGroupsProperty, EveryKindPartitionsTheWorld) {
  const GroupCase& p = GetParam();
  const Topology t(make_config(p.tp, p.cp, p.dp, p.pp, p.order, p.ep));
  for (GroupKind kind : kKinds) {
    SCOPED_TRACE("kind " + kind_name(kind));
    const auto groups = t.all_groups(kind);
    const int size = expected_size(t, kind);
    ASSERT_EQ(static_cast<int>(groups.size()) * size, t.world_size());
    std::map<int, int> group_of;  // rank -> index of its group
    int previous_min = -1;
    for (size_t g = 0; g < groups.size(); ++g) {
      ASSERT_EQ(static_cast<int>(groups[g].size()), size);
      const int smallest = *std::min_element(groups[g].begin(), groups[g].end());
      EXPECT_GT(smallest, previous_min) << "groups are not ordered by their smallest rank";
      previous_min = smallest;
      for (int r : groups[g]) {
        ASSERT_GE(r, 0);
        ASSERT_LT(r, t.world_size());
        EXPECT_TRUE(group_of.emplace(r, static_cast<int>(g)).second)
            << "rank " << r << " is in more than one group";
      }
    }
    EXPECT_EQ(static_cast<int>(group_of.size()), t.world_size());

    for (int r = 0; r < t.world_size(); ++r) {
      const auto ranks = t.group_ranks(kind, r);
      ASSERT_EQ(ranks, groups[static_cast<size_t>(group_of.at(r))]) << "rank " << r;
      const int gr = t.group_rank(kind, r);
      ASSERT_GE(gr, 0);
      ASSERT_LT(gr, size);
      EXPECT_EQ(ranks[static_cast<size_t>(gr)], r);
      const Coordinates me = t.coordinates(r);
      for (int i = 0; i < size; ++i) {
        const Coordinates member = t.coordinates(ranks[static_cast<size_t>(i)]);
        EXPECT_EQ(member, expected_member(t, kind, me, i))
            << "rank " << r << " member " << i << " is " << str(member);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TopologyLayouts, TopologyGroupsProperty,
                         ::testing::Values(GroupCase{1, 1, 1, 1, 1, "tp-cp-ep-dp-pp"},
                                           GroupCase{2, 2, 2, 2, 1, "tp-cp-ep-dp-pp"},
                                           GroupCase{2, 2, 2, 2, 4, "tp-cp-ep-dp-pp"},
                                           GroupCase{4, 1, 8, 2, 8, "tp-cp-ep-dp-pp"},
                                           GroupCase{2, 3, 4, 2, 6, "tp-cp-ep-dp-pp"},
                                           GroupCase{2, 3, 4, 2, 3, "tp-dp-cp-pp"},
                                           GroupCase{3, 2, 2, 3, 2, "cp-tp-dp-pp"},
                                           GroupCase{2, 4, 3, 2, 12, "pp-dp-cp-tp"},
                                           GroupCase{1, 2, 6, 1, 4, "dp-ep-pp-tp-cp"}));

// ---------------------------------------------------------------------------------------------
// Micro-batch multiple

TEST(TopologyMicrobatch, OneWithoutVirtualPipelining) {
  TopologyConfig c = make_config(1, 1, 2, 4);
  c.vpp = 1;
  c.vpp_group = 7;  // ignored when vpp == 1
  EXPECT_EQ(Topology(c).microbatch_multiple(), 1);
}

TEST(TopologyMicrobatch, PpWhenVppGroupIsZero) {
  TopologyConfig c = make_config(1, 1, 2, 4);
  c.vpp = 2;
  c.vpp_group = 0;
  EXPECT_EQ(Topology(c).microbatch_multiple(), 4);
}

TEST(TopologyMicrobatch, VppGroupWhenGiven) {
  TopologyConfig c = make_config(1, 1, 2, 4);
  c.vpp = 3;
  c.vpp_group = 6;
  const Topology t(c);
  EXPECT_EQ(t.microbatch_multiple(), 6);
  EXPECT_EQ(t.vpp(), 3);
}

// ---------------------------------------------------------------------------------------------
// Validation

TEST(TopologyErrors, NonPositiveSizes) {
  using E = InvalidArgument;
  expect_throw_with<E>([] { Topology(make_config(0, 1, 1, 1)); }, {"tp", ">= 1", "0"});
  expect_throw_with<E>([] { Topology(make_config(1, 0, 1, 1)); }, {"cp", ">= 1"});
  expect_throw_with<E>([] { Topology(make_config(1, 1, -2, 1)); }, {"dp", "-2"});
  expect_throw_with<E>([] { Topology(make_config(1, 1, 1, 0)); }, {"pp", ">= 1"});
  expect_throw_with<E>([] { Topology(make_config(1, 1, 1, 1, "tp-cp-ep-dp-pp", 0)); },
                       {"ep", ">= 1"});
  TopologyConfig c;
  c.vpp = 0;
  expect_throw_with<E>([&] { Topology{c}; }, {"vpp", ">= 1"});
  c.vpp = 2;
  c.vpp_group = -1;
  expect_throw_with<E>([&] { Topology{c}; }, {"vpp_group"});
}

TEST(TopologyErrors, WorldSizeMustMatchTheLayout) {
  const Topology t(make_config(2, 2, 2, 1));
  EXPECT_NO_THROW(t.check_world_size(8));
  expect_throw_with<InvalidArgument>([&] { t.check_world_size(6); },
                                     {"world size 6", "tp*cp*dp*pp = 8"});
  expect_throw_with<InvalidArgument>([&] { t.check_world_size(16); }, {"world size 16"});
}

TEST(TopologyErrors, EpMustDivideDpTimesCp) {
  expect_throw_with<InvalidArgument>([] { Topology(make_config(1, 3, 2, 1, "tp-cp-ep-dp-pp", 4)); },
                                     {"ep=4", "dp*cp=6"});
  // ep may span CP ranks: cp 2, dp 3 allows ep 6, 3, 2.
  EXPECT_NO_THROW(Topology(make_config(1, 2, 3, 1, "tp-cp-ep-dp-pp", 6)));
  EXPECT_NO_THROW(Topology(make_config(1, 2, 3, 1, "tp-cp-ep-dp-pp", 3)));
}

TEST(TopologyErrors, BadOrderStrings) {
  using E = InvalidArgument;
  auto with_order = [](const std::string& order) {
    return [order] { Topology(make_config(2, 2, 2, 2, order)); };
  };
  expect_throw_with<E>(with_order("tp-cp-xp-dp-pp"), {"tp-cp-xp-dp-pp", "'xp'"});
  expect_throw_with<E>(with_order("tp-cp-dp"), {"tp-cp-dp", "each of tp, cp, dp, pp"});
  expect_throw_with<E>(with_order(""), {"each of tp, cp, dp, pp"});
  expect_throw_with<E>(with_order("tp-tp-dp-pp"), {"'tp' twice"});
  expect_throw_with<E>(with_order("tp-cp-dp-pp-cp"), {"'cp' twice"});
  expect_throw_with<E>(with_order("TP-CP-DP-PP"), {"'TP'"});
  expect_throw_with<E>(with_order("tp,cp,dp,pp"), {"tp,cp,dp,pp"});
  expect_throw_with<E>(with_order("tp--cp-dp-pp"), {"tp--cp-dp-pp"});
  expect_throw_with<E>(with_order("tp-cp-ep-ep-dp-pp"), {"'ep' twice"});
  expect_throw_with<E>(with_order("tp-cp-dp-pp-"), {"tp-cp-dp-pp-"});
}

TEST(TopologyErrors, RankOutOfRange) {
  const Topology t(make_config(2, 2, 2, 2));
  expect_throw_with<InvalidArgument>([&] { t.coordinates(16); }, {"rank 16", "16", "tp=2"});
  expect_throw_with<InvalidArgument>([&] { t.coordinates(-1); }, {"rank -1"});
  expect_throw_with<InvalidArgument>([&] { t.group_ranks(GroupKind::kDp, 16); }, {"rank 16"});
  expect_throw_with<InvalidArgument>([&] { t.group_rank(GroupKind::kTp, -3); }, {"rank -3"});
}

TEST(TopologyErrors, CoordinateOutOfRange) {
  const Topology t(make_config(2, 3, 4, 1));
  expect_throw_with<InvalidArgument>([&] { t.rank_of({2, 0, 0, 0}); }, {"tp", "2"});
  expect_throw_with<InvalidArgument>([&] { t.rank_of({0, 3, 0, 0}); }, {"cp", "3"});
  expect_throw_with<InvalidArgument>([&] { t.rank_of({0, 0, -1, 0}); }, {"dp", "-1"});
  expect_throw_with<InvalidArgument>([&] { t.rank_of({0, 0, 0, 1}); }, {"pp", "1"});
}

// Every product of sizes must fit an int: random sizes whose product passes 2^31-1 are refused,
// and those below it are accepted with the exact world size.
TEST(Topology, SizesWhoseProductOverflowsAreRefused) {
  std::mt19937_64 rng(31);
  for (int seed = 0; seed < 500; ++seed) {
    int sizes[4];
    for (int& s : sizes) s = 1 + static_cast<int>(rng() % (rng() % 2 ? 100000 : 64));
    // As a double: exact below 2^53, and far past 2^31 where it is not.
    const double product = 1.0 * sizes[0] * sizes[1] * sizes[2] * sizes[3];
    const TopologyConfig c = make_config(sizes[0], sizes[1], sizes[2], sizes[3]);
    if (product > std::numeric_limits<int>::max()) {
      expect_throw_with<InvalidArgument>([&] { Topology t(c); }, "exceeds 2^31-1");
    } else {
      EXPECT_EQ(Topology(c).world_size(), product);
    }
  }
  expect_throw_with<InvalidArgument>([] { Topology t(make_config(65536, 1, 65536, 1)); },
                                     "tp*cp*dp*pp = 65536*1*65536*1 ranks exceeds 2^31-1");
}

}  // namespace
}  // namespace thdpack
