#pragma once
// Which pack of a replica has room: the balanced scheduler's per-replica index of pack room, so
// that choosing a pack costs O(log K) (or a short scan, up to kScanLimit packs) instead of a scan
// of all the replica's K packs.

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace thdpack::detail {

/// Packs (bins) numbered replica·K + k, each with a room in tokens. Per replica:
/// - the lowest pack with room for a length (first fit), O(log K);
/// - the roomiest pack (worst fit; ties to the lower bin) from a tournament tree, O(1) to read and
///   O(log K) to update;
/// - once enable_best_fit() was called, the tightest pack that still fits a length (best fit; ties
///   to the lower bin) from an ordered set, O(log K) to query and update; up to kScanLimit packs
///   per replica, a scan of their rooms (contiguous) is faster than any set and is used instead.
class RoomIndex {
 public:
  static constexpr int64_t kScanLimit = 64;

  RoomIndex(int dp, int64_t k, int64_t capacity);

  /// Records that `bin` now has `room` tokens free.
  void set(int64_t bin, int64_t room);
  /// Tokens free in `bin`.
  int64_t room(int64_t bin) const { return node_room_[leaf(bin)]; }
  /// The bin of `replica` with the most room.
  int64_t roomiest(int replica) const { return node_bin_[node(replica, 1)]; }
  /// The lowest bin of `replica` with room >= length (first fit), or -1: O(log K), a walk down
  /// the tournament tree.
  int64_t first_fit(int replica, int64_t length) const;
  /// The most room any pack of `replica` has.
  int64_t max_room(int replica) const { return node_room_[node(replica, 1)]; }
  /// Builds the ordered sets that tightest() needs (O(dp·K log K)); later set() calls keep them.
  void enable_best_fit();
  /// The bin of `replica` with the least room >= length, or -1. Needs enable_best_fit() (an
  /// InternalError otherwise).
  int64_t tightest(int replica, int64_t length) const;

 private:
  size_t node(int replica, size_t index) const {
    return static_cast<size_t>(replica) * 2 * leaves_ + index;
  }
  // The tree node that holds `bin`'s room: the leaves of a replica are contiguous, in bin order.
  size_t leaf(int64_t bin) const {
    return node(static_cast<int>(bin / k_), leaves_ + static_cast<size_t>(bin % k_));
  }
  // Node n of `replica` takes the winner of its two children: the larger room, ties to the left
  // child (the lower bin).
  void match(int replica, size_t n);

  int dp_;
  int64_t k_;
  size_t leaves_ = 1;
  // Per replica, a tournament tree of 2·leaves nodes (1-based); leaf rooms are the packs' rooms.
  std::vector<int64_t> node_room_;
  std::vector<int64_t> node_bin_;
  std::vector<std::set<std::pair<int64_t, int64_t>>> by_room_;  // per replica: (room, bin)
};

}  // namespace thdpack::detail
