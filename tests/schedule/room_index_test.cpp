// The balanced scheduler's index of pack room (src/schedule/room_index.hpp): after any sequence of
// updates, the roomiest, the first-fitting and the tight-fitting pack of every replica are exactly
// what a scan of its packs finds, ties going to the lower pack (the tight fit is the best fit up to
// RoomIndex::kScanLimit packs per replica and the first fit past it).

#include "schedule/room_index.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace thdpack::detail {
namespace {

struct Scan {
  int64_t k;
  std::vector<int64_t> room;
  int64_t roomiest(int r) const {
    int64_t best = r * k;
    for (int64_t b = r * k; b < (r + 1) * k; ++b) {
      if (room[static_cast<size_t>(b)] > room[static_cast<size_t>(best)]) best = b;
    }
    return best;
  }
  int64_t tight_fit(int r, int64_t length) const {
    if (k > RoomIndex::kScanLimit) return first_fit(r, length);
    int64_t best = -1;
    for (int64_t b = r * k; b < (r + 1) * k; ++b) {
      const int64_t x = room[static_cast<size_t>(b)];
      if (x >= length && (best < 0 || x < room[static_cast<size_t>(best)])) best = b;
    }
    return best;
  }
  int64_t first_fit(int r, int64_t length) const {
    for (int64_t b = r * k; b < (r + 1) * k; ++b) {
      if (room[static_cast<size_t>(b)] >= length) return b;
    }
    return -1;
  }
};

TEST(RoomIndex, MatchesAScanUnderRandomUpdates) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 240; ++trial) {
    const int dp = 1 + static_cast<int>(rng() % 6);
    // Small K (scanned), K past RoomIndex::kScanLimit (two or three levels of the tree) and K of a
    // few thousand (four or five levels); multiples of the fanout and not.
    const int64_t k = trial % 4 == 0 ? RoomIndex::kScanLimit + 1 + static_cast<int64_t>(rng() % 80)
                      : trial % 4 == 1 ? 500 + static_cast<int64_t>(rng() % 5000)
                                       : 1 + static_cast<int64_t>(rng() % 17);
    const int64_t capacity = 1 + static_cast<int64_t>(rng() % 64);
    RoomIndex index(dp, k, capacity);
    Scan scan{k, std::vector<int64_t>(static_cast<size_t>(dp * k), capacity)};
    const int steps = k > 400 ? 3000 : 200;
    for (int step = 0; step < steps; ++step) {
      const int64_t bin = static_cast<int64_t>(rng() % static_cast<uint64_t>(dp * k));
      // Few distinct rooms, so ties are common.
      const int64_t room =
          static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity + 1)) / 4 * 4;
      index.set(bin, room);
      scan.room[static_cast<size_t>(bin)] = room;
      if (k > 400 && step % 50 != 49) continue;  // a scan of thousands of packs: check now and then
      for (int r = 0; r < dp; ++r) {
        ASSERT_EQ(index.roomiest(r), scan.roomiest(r)) << "trial " << trial << " step " << step;
        ASSERT_EQ(index.max_room(r), scan.room[static_cast<size_t>(scan.roomiest(r))]);
        for (int64_t b = r * k; b < (r + 1) * k; b += 1 + b % 7)
          ASSERT_EQ(index.room(b), scan.room[static_cast<size_t>(b)]);
        const int64_t wanted = static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity + 2));
        ASSERT_EQ(index.first_fit(r, wanted), scan.first_fit(r, wanted))
            << "trial " << trial << " step " << step << " length " << wanted;
        const int64_t length = static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity + 2));
        ASSERT_EQ(index.tight_fit(r, length), scan.tight_fit(r, length))
            << "trial " << trial << " step " << step << " length " << length;
      }
    }
  }
}

TEST(RoomIndex, NothingFitsMeansMinusOne) {
  for (const int64_t k : {int64_t{2}, int64_t{3}, RoomIndex::kScanLimit + 3, int64_t{4097}}) {
    RoomIndex index(2, k, 100000);
    // Replica 0 has rooms 0 1 2 ..., replica 1 has rooms k k+1 ... .
    for (int64_t b = 0; b < 2 * k; ++b) index.set(b, b);
    EXPECT_EQ(index.tight_fit(0, k), -1);
    EXPECT_EQ(index.first_fit(0, k), -1);
    EXPECT_EQ(index.tight_fit(1, k + 1), k + 1);
    EXPECT_EQ(index.tight_fit(1, 2 * k), -1);
    EXPECT_EQ(index.first_fit(1, 2 * k - 1), 2 * k - 1);
    EXPECT_EQ(index.roomiest(0), k - 1);
    EXPECT_EQ(index.max_room(1), 2 * k - 1);
  }
}

}  // namespace
}  // namespace thdpack::detail
