#include "schedule/room_index.hpp"

#include <cstdint>
#include <limits>

namespace thdpack::detail {

int64_t RoomIndex::tight_fit(int replica, int64_t length) const {
  if (k_ > kScanLimit) return first_fit(replica, length);
  int64_t chosen = -1;
  int64_t chosen_room = std::numeric_limits<int64_t>::max();
  const int64_t* rooms = rooms_.leaves(replica);  // the replica's rooms, contiguous
  for (int64_t i = 0; i < k_; ++i) {
    if (rooms[i] >= length && rooms[i] < chosen_room) {
      chosen = i;
      chosen_room = rooms[i];
    }
  }
  return chosen < 0 ? -1 : first_bin(replica) + chosen;
}

}  // namespace thdpack::detail
