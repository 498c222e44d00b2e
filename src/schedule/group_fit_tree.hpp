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
    room_.assign(2, kNoRoom);
    load_.assign(2, kNoLoad);
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
    room_[node] = room;
    load_[node] = load;
    for (node /= 2; node >= 1; node /= 2) {
      const int64_t room_above = std::max(room_[2 * node], room_[2 * node + 1]);
      const double load_above = std::min(load_[2 * node], load_[2 * node + 1]);
      if (room_above == room_[node] && load_above == load_[node]) break;  // nothing above changes
      room_[node] = room_above;
      load_[node] = load_above;
    }
  }
  int64_t room(size_t i) const { return room_[leaves_ + i]; }
  double load(size_t i) const { return load_[leaves_ + i]; }
  /// The most room of any group (-1 when there is none).
  int64_t most_room() const { return room_[1]; }

  /// The first group at or after `from` with room >= need and load <= limit, or npos.
  size_t first_fit(size_t from, int64_t need, double limit) const {
    return first_fit(1, 0, leaves_, from, need, limit);
  }
  /// The least load of a group with room >= need (infinity when none has).
  double least_load(int64_t need) const {
    double best = kNoLoad;
    least_load(1, need, best);
    return best;
  }

 private:
  static constexpr int64_t kNoRoom = -1;
  static constexpr double kNoLoad = std::numeric_limits<double>::infinity();

  /// Twice the leaves, the groups kept (no allocation once the vectors have had the room).
  void grow() {
    kept_room_.assign(room_.begin() + static_cast<std::ptrdiff_t>(leaves_), room_.end());
    kept_load_.assign(load_.begin() + static_cast<std::ptrdiff_t>(leaves_), load_.end());
    leaves_ *= 2;
    room_.assign(2 * leaves_, kNoRoom);
    load_.assign(2 * leaves_, kNoLoad);
    std::copy(kept_room_.begin(), kept_room_.end(),
              room_.begin() + static_cast<std::ptrdiff_t>(leaves_));
    std::copy(kept_load_.begin(), kept_load_.end(),
              load_.begin() + static_cast<std::ptrdiff_t>(leaves_));
    for (size_t node = leaves_ - 1; node >= 1; --node) {
      room_[node] = std::max(room_[2 * node], room_[2 * node + 1]);
      load_[node] = std::min(load_[2 * node], load_[2 * node + 1]);
    }
  }

  size_t first_fit(size_t node, size_t lo, size_t hi, size_t from, int64_t need,
                   double limit) const {
    if (hi <= from || room_[node] < need || !(load_[node] <= limit)) return npos;
    if (node >= leaves_) return lo;
    const size_t mid = (lo + hi) / 2;
    const size_t left = first_fit(2 * node, lo, mid, from, need, limit);
    return left != npos ? left : first_fit(2 * node + 1, mid, hi, from, need, limit);
  }
  void least_load(size_t node, int64_t need, double& best) const {
    if (room_[node] < need || !(load_[node] < best)) return;
    if (node >= leaves_) {
      best = load_[node];
      return;
    }
    least_load(2 * node, need, best);
    least_load(2 * node + 1, need, best);
  }

  size_t leaves_ = 1;
  size_t size_ = 0;
  std::vector<int64_t> room_ = std::vector<int64_t>(2, kNoRoom);
  std::vector<double> load_ = std::vector<double>(2, kNoLoad);
  std::vector<int64_t> kept_room_;
  std::vector<double> kept_load_;
};

}  // namespace thdpack::detail
