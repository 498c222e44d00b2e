#pragma once
// Which pack of a replica has room: the balanced scheduler's per-replica index of pack room, so
// that choosing a pack costs O(log K) (or a short scan, up to kScanLimit packs) instead of a scan
// of all the replica's K packs, with no allocation after construction.

#include <cstdint>

#include "schedule/max_forest.hpp"

namespace thdpack::detail {

/// Packs (bins) numbered replica·K + k, each with a room in tokens. Per replica:
/// - the lowest pack with room for a length (first fit);
/// - the roomiest pack (worst fit; ties to the lower bin);
/// - a tight pack for a length: up to kScanLimit packs per replica the tightest that fits (best
/// fit;
///   ties to the lower bin, a scan of the replica's contiguous rooms); past it the lowest that
///   fits (first fit). On items in decreasing length both leave the big holes for big items; an
///   exact best fit over thousands of packs would need an ordered set per replica, whose node
///   allocations and cache misses made it most of the scheduler's time at a million items.
/// Each replica's rooms sit under a tree of maxima with 8 children per node (MaxForest), so a query
/// or an update touches about log_8(K) cache lines: O(log K) each.
class RoomIndex {
 public:
  static constexpr int64_t kScanLimit = 64;

  RoomIndex(int dp, int64_t k, int64_t capacity) : k_(k), rooms_(dp, k, capacity) {}

  /// Records that `bin` now has `room` tokens free (room >= 0).
  void set(int64_t bin, int64_t room) { rooms_.set(bin / k_, bin % k_, room); }
  /// Tokens free in `bin`.
  int64_t room(int64_t bin) const { return rooms_.value(bin / k_, bin % k_); }
  /// The bin of `replica` with the most room (ties to the lower bin).
  int64_t roomiest(int replica) const { return first_bin(replica) + rooms_.leftmost_max(replica); }
  /// The lowest bin of `replica` with room >= length (first fit), or -1.
  int64_t first_fit(int replica, int64_t length) const {
    const int64_t at = rooms_.leftmost_at_least(replica, length);
    return at < 0 ? -1 : first_bin(replica) + at;
  }
  /// The most room any pack of `replica` has.
  int64_t max_room(int replica) const { return rooms_.max(replica); }
  /// A tight bin of `replica` with room >= length, or -1: the least such room (ties to the lower
  /// bin) up to kScanLimit bins per replica, else first_fit(replica, length).
  int64_t tight_fit(int replica, int64_t length) const;

 private:
  int64_t first_bin(int replica) const { return static_cast<int64_t>(replica) * k_; }

  int64_t k_;
  MaxForest rooms_;
};

}  // namespace thdpack::detail
