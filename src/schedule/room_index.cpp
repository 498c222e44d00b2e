#include "schedule/room_index.hpp"

#include <cstdint>
#include <limits>

#include "thdpack/core/errors.hpp"

namespace thdpack::detail {

RoomIndex::RoomIndex(int dp, int64_t k, int64_t capacity) : dp_(dp), k_(k) {
  while (leaves_ < static_cast<size_t>(k)) leaves_ *= 2;
  // Leaves past K have room -1, so they never win against a real pack.
  node_room_.assign(static_cast<size_t>(dp) * 2 * leaves_, -1);
  node_bin_.assign(node_room_.size(), -1);
  for (int64_t bin = 0; bin < dp * k; ++bin) {
    node_room_[leaf(bin)] = capacity;
    node_bin_[leaf(bin)] = bin;
  }
  for (int r = 0; r < dp; ++r) {
    for (size_t n = leaves_ - 1; n >= 1; --n) match(r, n);
  }
}

void RoomIndex::match(int replica, size_t n) {
  const size_t left = node(replica, 2 * n);
  const size_t right = node(replica, 2 * n + 1);
  const size_t winner = node_room_[right] > node_room_[left] ? right : left;
  node_room_[node(replica, n)] = node_room_[winner];
  node_bin_[node(replica, n)] = node_bin_[winner];
}

void RoomIndex::set(int64_t bin, int64_t room) {
  const auto replica = static_cast<int>(bin / k_);
  const size_t at = leaf(bin);
  if (!by_room_.empty()) {
    auto& rooms = by_room_[static_cast<size_t>(replica)];
    rooms.erase({node_room_[at], bin});
    rooms.emplace(room, bin);
  }
  node_room_[at] = room;
  for (size_t n = (at - node(replica, 0)) / 2; n >= 1; n /= 2) match(replica, n);
}

int64_t RoomIndex::first_fit(int replica, int64_t length) const {
  if (node_room_[node(replica, 1)] < length) return -1;
  // Each node holds the larger room of its children, so the left child has a fitting leaf
  // whenever its room is >= length; leaves past K (room -1) are never reached.
  size_t n = 1;
  while (n < leaves_) n = node_room_[node(replica, 2 * n)] >= length ? 2 * n : 2 * n + 1;
  return node_bin_[node(replica, n)];
}

void RoomIndex::enable_best_fit() {
  if (!by_room_.empty() || k_ <= kScanLimit) return;
  by_room_.resize(static_cast<size_t>(dp_));
  for (int64_t bin = 0; bin < dp_ * k_; ++bin) {
    by_room_[static_cast<size_t>(bin / k_)].emplace(room(bin), bin);
  }
}

int64_t RoomIndex::tightest(int replica, int64_t length) const {
  if (k_ <= kScanLimit) {
    int64_t chosen = -1;
    int64_t chosen_room = std::numeric_limits<int64_t>::max();
    const int64_t first = static_cast<int64_t>(replica) * k_;
    const size_t first_leaf = leaf(first);  // the replica's rooms, contiguous
    for (int64_t i = 0; i < k_; ++i) {
      const int64_t x = node_room_[first_leaf + static_cast<size_t>(i)];
      if (x >= length && x < chosen_room) {
        chosen = first + i;
        chosen_room = x;
      }
    }
    return chosen;
  }
  if (by_room_.empty()) throw InternalError("RoomIndex::tightest before enable_best_fit()");
  const auto& rooms = by_room_[static_cast<size_t>(replica)];
  const auto it = rooms.lower_bound({length, std::numeric_limits<int64_t>::min()});
  return it == rooms.end() ? -1 : it->second;
}

}  // namespace thdpack::detail
