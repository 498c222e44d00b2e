#include "schedule/room_index.hpp"

#include <cstdint>
#include <limits>

#include "thdpack/core/errors.hpp"

namespace thdpack::detail {

RoomIndex::RoomIndex(int dp, int64_t k, int64_t capacity)
    : k_(k), room_(static_cast<size_t>(dp * k), capacity) {
  while (leaves_ < static_cast<size_t>(k)) leaves_ *= 2;
  // Leaves past K have room -1, so they never win against a real pack.
  node_room_.assign(static_cast<size_t>(dp) * 2 * leaves_, -1);
  node_bin_.assign(node_room_.size(), -1);
  for (int r = 0; r < dp; ++r) {
    for (size_t i = 0; i < static_cast<size_t>(k); ++i) {
      node_room_[node(r, leaves_ + i)] = capacity;
      node_bin_[node(r, leaves_ + i)] = static_cast<int64_t>(r) * k + static_cast<int64_t>(i);
    }
    for (size_t n = leaves_ - 1; n >= 1; --n) {
      // Equal rooms everywhere: the left child (lower bin) wins.
      const size_t left = node(r, 2 * n);
      const size_t right = node(r, 2 * n + 1);
      const bool right_wins = node_room_[right] > node_room_[left];
      node_room_[node(r, n)] = node_room_[right_wins ? right : left];
      node_bin_[node(r, n)] = node_bin_[right_wins ? right : left];
    }
  }
}

void RoomIndex::update_path(int replica, size_t leaf) {
  for (size_t n = leaf / 2; n >= 1; n /= 2) {
    const size_t left = node(replica, 2 * n);
    const size_t right = node(replica, 2 * n + 1);
    const bool right_wins = node_room_[right] > node_room_[left];  // ties: the lower bin
    node_room_[node(replica, n)] = node_room_[right_wins ? right : left];
    node_bin_[node(replica, n)] = node_bin_[right_wins ? right : left];
  }
}

void RoomIndex::set(int64_t bin, int64_t room) {
  const auto replica = static_cast<int>(bin / k_);
  const auto b = static_cast<size_t>(bin);
  if (!by_room_.empty()) {
    auto& rooms = by_room_[static_cast<size_t>(replica)];
    rooms.erase({room_[b], bin});
    rooms.emplace(room, bin);
  }
  room_[b] = room;
  const size_t leaf = leaves_ + static_cast<size_t>(bin % k_);
  node_room_[node(replica, leaf)] = room;
  update_path(replica, leaf);
}

void RoomIndex::enable_best_fit() {
  if (!by_room_.empty() || k_ <= kScanLimit) return;
  const size_t dp = room_.size() / static_cast<size_t>(k_);
  by_room_.resize(dp);
  for (size_t bin = 0; bin < room_.size(); ++bin) {
    by_room_[bin / static_cast<size_t>(k_)].emplace(room_[bin], static_cast<int64_t>(bin));
  }
}

int64_t RoomIndex::tightest(int replica, int64_t length) const {
  if (k_ <= kScanLimit) {
    int64_t chosen = -1;
    int64_t chosen_room = std::numeric_limits<int64_t>::max();
    const int64_t first = static_cast<int64_t>(replica) * k_;
    for (int64_t b = first; b < first + k_; ++b) {
      const int64_t room = room_[static_cast<size_t>(b)];
      if (room >= length && room < chosen_room) {
        chosen = b;
        chosen_room = room;
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
