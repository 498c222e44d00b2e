// default_dynamic_cp's index of one size's groups (src/schedule/group_fit_tree.hpp): after any
// sequence of appends and updates, the first group with room and a load under a limit, the least
// load among groups with room, and the most room are exactly what a scan of the groups finds.

#include "schedule/group_fit_tree.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace thdpack::detail {
namespace {

struct Scan {
  std::vector<int64_t> room;
  std::vector<double> load;
  size_t first_fit(size_t from, int64_t need, double limit) const {
    for (size_t i = from; i < room.size(); ++i) {
      if (room[i] >= need && load[i] <= limit) return i;
    }
    return GroupFitTree::npos;
  }
  double least_load(int64_t need) const {
    double best = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < room.size(); ++i) {
      if (room[i] >= need) best = std::min(best, load[i]);
    }
    return best;
  }
  int64_t most_room() const {
    int64_t best = -1;
    for (const int64_t r : room) best = std::max(best, r);
    return best;
  }
};

TEST(GroupFitTree, QueriesMatchAScanAfterRandomAppendsAndUpdates) {
  GroupFitTree tree;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::mt19937_64 rng(seed);
    const size_t most_groups = 1 + rng() % 70;
    tree.reset();  // reused: a reset must forget the last case's groups; pushes grow it
    Scan scan;
    EXPECT_EQ(tree.most_room(), -1);
    for (int op = 0; op < 300; ++op) {
      // Few distinct loads and rooms, so ties (first in creation order) are common.
      const int64_t room = static_cast<int64_t>(rng() % 12);
      // Few distinct loads (ties) in half the cases, loads a few ulps apart in the others.
      const double load =
          seed % 2 ? static_cast<double>(rng() % 9)
                   : std::nextafter(1.0 + static_cast<double>(rng() % 3), rng() % 2 ? 0.0 : 4.0);
      if (scan.room.size() < most_groups && (scan.room.empty() || rng() % 3 == 0)) {
        tree.push(room, load);
        scan.room.push_back(room);
        scan.load.push_back(load);
      } else {
        const size_t i = rng() % scan.room.size();
        tree.set(i, room, load);
        scan.room[i] = room;
        scan.load[i] = load;
      }
      ASSERT_EQ(tree.size(), scan.room.size());
      const int64_t need = static_cast<int64_t>(rng() % 13);
      const double limit =
          seed % 2 ? static_cast<double>(rng() % 10) - 0.5
                   : std::nextafter(1.0 + static_cast<double>(rng() % 3), rng() % 2 ? 0.0 : 4.0);
      const size_t from = rng() % (scan.room.size() + 1);
      SCOPED_TRACE("seed " + std::to_string(seed) + " op " + std::to_string(op));
      ASSERT_EQ(tree.first_fit(from, need, limit), scan.first_fit(from, need, limit));
      ASSERT_EQ(tree.least_load(need), scan.least_load(need));
      ASSERT_EQ(tree.most_room(), scan.most_room());
      ASSERT_EQ(tree.room(0), scan.room[0]);
      ASSERT_EQ(tree.load(0), scan.load[0]);
    }
  }
}

}  // namespace
}  // namespace thdpack::detail
