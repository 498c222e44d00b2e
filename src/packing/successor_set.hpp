#pragma once
// A set of integers in [0, universe) with O(log64 universe) insert, erase and "smallest element
// >= x": a three-level 64-ary bitset. Used to find the pack with the least room that fits an item.

#include <bit>
#include <cstdint>
#include <vector>

namespace thdpack::detail {

class SuccessorSet {
 public:
  explicit SuccessorSet(int64_t universe) {
    int64_t n = universe;
    do {
      n = (n + 63) / 64;
      levels_.emplace_back(static_cast<size_t>(n), 0);
    } while (n > 1);
  }

  void insert(int64_t x) {
    for (auto& level : levels_) {
      uint64_t& word = level[static_cast<size_t>(x >> 6)];
      const bool was_empty = word == 0;
      word |= uint64_t{1} << (x & 63);
      if (!was_empty) return;
      x >>= 6;
    }
  }

  void erase(int64_t x) {
    for (auto& level : levels_) {
      uint64_t& word = level[static_cast<size_t>(x >> 6)];
      word &= ~(uint64_t{1} << (x & 63));
      if (word != 0) return;
      x >>= 6;
    }
  }

  /// Smallest element >= x, or -1 if none.
  int64_t next(int64_t x) const {
    size_t depth = 0;
    // Walk up until a word holds a set bit at or after the position.
    for (;; ++depth) {
      if (depth == levels_.size()) return -1;
      const auto& level = levels_[depth];
      const auto w = static_cast<size_t>(x >> 6);
      if (w >= level.size()) return -1;
      const int bit = static_cast<int>(x & 63);
      const uint64_t masked = level[w] & (~uint64_t{0} << bit);
      if (masked != 0) {
        x = (static_cast<int64_t>(w) << 6) + std::countr_zero(masked);
        break;
      }
      x = static_cast<int64_t>(w) + 1;  // continue after this word, one level up
    }
    // Walk down to the first set leaf under x.
    while (depth > 0) {
      --depth;
      const uint64_t word = levels_[depth][static_cast<size_t>(x)];
      x = (x << 6) + std::countr_zero(word);
    }
    return x;
  }

 private:
  std::vector<std::vector<uint64_t>> levels_;
};

}  // namespace thdpack::detail
