#pragma once
// The CP groups of one size in one default_dynamic_cp round, in creation order, each with its
// token room and load, under a tree of (most room, least load) so that the group Megatron's scan
// would choose is found without visiting every group: a round of a large batch forms hundreds of
// groups, and every sample used to scan them all.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace thdpack::detail {

class GroupFitTree {
 public:
  static constexpr size_t npos = std::numeric_limits<size_t>::max();

  /// Empties the tree. O(1): a round of a batch on many ranks may form only a few groups.
  void reset() {
    leaves_ = 1;
    nodes_.assign(2, kEmpty);
    size_ = 0;
  }
  size_t size() const { return size_; }
  /// Appends a group (index size() before the call); the tree doubles when it is full.
  void push(int64_t room, double load) {
    if (size_ == leaves_) grow();
    set(size_++, room, load);
  }
  /// Records group `i`'s room (>= 0) and load.
  void set(size_t i, int64_t room, double load) {
    size_t node = leaves_ + i;
    nodes_[node] = {room, load};
    for (node /= 2; node >= 1; node /= 2) {
      const Node above = join(nodes_[2 * node], nodes_[2 * node + 1]);
      if (above.room == nodes_[node].room && above.load == nodes_[node].load) break;  // no change
      nodes_[node] = above;
    }
  }
  int64_t room(size_t i) const { return nodes_[leaves_ + i].room; }
  double load(size_t i) const { return nodes_[leaves_ + i].load; }
  /// The most room of any group (-1 when there is none).
  int64_t most_room() const { return nodes_[1].room; }

  /// The first group at or after `from` with room >= need and load <= limit, or npos.
  size_t first_fit(size_t from, int64_t need, double limit) const {
    return first_fit(1, 0, leaves_, from, need, limit);
  }
  /// The least load of a group with room >= need (infinity when none has).
  double least_load(int64_t need) const {
    double best = kEmpty.load;
    least_load(1, need, best);
    return best;
  }

 private:
  /// A subtree's most room and least load, side by side (a node's update reads one cache line
  /// per child instead of two).
  struct Node {
    int64_t room;
    double load;
  };
  static constexpr Node kEmpty{-1, std::numeric_limits<double>::infinity()};

  static Node join(const Node& a, const Node& b) {
    return {std::max(a.room, b.room), std::min(a.load, b.load)};
  }

  /// Twice the leaves, the groups kept (no allocation once the vectors have had the room).
  void grow() {
    kept_.assign(nodes_.begin() + static_cast<std::ptrdiff_t>(leaves_), nodes_.end());
    leaves_ *= 2;
    nodes_.assign(2 * leaves_, kEmpty);
    std::copy(kept_.begin(), kept_.end(), nodes_.begin() + static_cast<std::ptrdiff_t>(leaves_));
    for (size_t node = leaves_ - 1; node >= 1; --node) {
      nodes_[node] = join(nodes_[2 * node], nodes_[2 * node + 1]);
    }
  }

  size_t first_fit(size_t node, size_t lo, size_t hi, size_t from, int64_t need,
                   double limit) const {
    if (hi <= from || nodes_[node].room < need || !(nodes_[node].load <= limit)) return npos;
    if (node >= leaves_) return lo;
    const size_t mid = (lo + hi) / 2;
    const size_t left = first_fit(2 * node, lo, mid, from, need, limit);
    return left != npos ? left : first_fit(2 * node + 1, mid, hi, from, need, limit);
  }
  void least_load(size_t node, int64_t need, double& best) const {
    if (nodes_[node].room < need || !(nodes_[node].load < best)) return;
    if (node >= leaves_) {
      best = nodes_[node].load;
      return;
    }
    least_load(2 * node, need, best);
    least_load(2 * node + 1, need, best);
  }

  size_t leaves_ = 1;
  size_t size_ = 0;
  std::vector<Node> nodes_ = std::vector<Node>(2, kEmpty);
  std::vector<Node> kept_;
};

}  // namespace thdpack::detail
