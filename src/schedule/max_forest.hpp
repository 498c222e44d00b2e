#pragma once
// Many equal-sized arrays of integers, each under a tree of maxima with kFanout children per node:
// set a leaf, read an array's maximum, find its leftmost leaf at least some value, in about
// log_8(size) cache lines each. The balanced scheduler keeps each replica's pack rooms in one
// (RoomIndex).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace thdpack::detail {

class MaxForest {
 public:
  /// Padding value: never the maximum of a node with a real leaf, never "at least" a real query.
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::lowest();

  /// `trees` arrays of `leaves` entries each, every entry `initial`.
  MaxForest(int64_t trees, int64_t leaves, int64_t initial) {
    size_t count = static_cast<size_t>(leaves);
    size_t offset = 0;
    for (;;) {
      level_start_.push_back(offset);
      level_count_.push_back(count);
      if (count <= 1) break;
      offset += round_up(count);
      count = (count + kFanout - 1) / kFanout;
    }
    root_ = level_start_.back();
    stride_ = round_up(root_ + 1);
    // Room for aligning tree 0 to a cache line; every stride is a whole number of lines.
    node_.assign(static_cast<size_t>(trees) * stride_ + kFanout, kNone);
    const auto address = reinterpret_cast<std::uintptr_t>(node_.data());
    origin_ = ((64 - address % 64) % 64) / sizeof(int64_t);
    for (int64_t t = 0; t < trees; ++t) {
      for (size_t l = 0; l < level_start_.size(); ++l) {
        std::fill_n(node_.begin() + static_cast<std::ptrdiff_t>(base(t) + level_start_[l]),
                    level_count_[l], initial);
      }
    }
  }

  /// Entry `i` of tree `t`.
  int64_t value(int64_t t, int64_t i) const { return node_[base(t) + static_cast<size_t>(i)]; }
  /// The entries of tree `t`, contiguous: [leaves(t), leaves(t) + leaves).
  const int64_t* leaves(int64_t t) const { return &node_[base(t)]; }
  /// The largest entry of tree `t`.
  int64_t max(int64_t t) const { return node_[base(t) + root_]; }

  void set(int64_t t, int64_t i, int64_t v) {
    const size_t block = base(t);
    auto at = static_cast<size_t>(i);
    node_[block + at] = v;
    for (size_t l = 0; l + 1 < level_start_.size(); ++l) {
      const int64_t* children = &node_[block + level_start_[l] + at / kFanout * kFanout];
      int64_t most = children[0];
      for (size_t c = 1; c < kFanout; ++c) most = std::max(most, children[c]);
      at /= kFanout;
      int64_t& parent = node_[block + level_start_[l + 1] + at];
      if (parent == most) return;  // nothing above changes
      parent = most;
    }
  }

  /// The leftmost entry of tree `t` that is >= x, or -1.
  int64_t leftmost_at_least(int64_t t, int64_t x) const {
    if (max(t) < x) return -1;
    return descend(t, [x](int64_t v) { return v >= x; });
  }
  /// The leftmost entry of tree `t` equal to its maximum.
  int64_t leftmost_max(int64_t t) const {
    const int64_t most = max(t);
    return descend(t, [most](int64_t v) { return v == most; });
  }

 private:
  static constexpr size_t kFanout = 8;  // 8 entries of 8 bytes: one 64-byte cache line
  static size_t round_up(size_t n) { return (n + kFanout - 1) / kFanout * kFanout; }

  size_t base(int64_t t) const { return origin_ + static_cast<size_t>(t) * stride_; }
  // From the root of tree `t` (whose maximum satisfies `wanted`) to the leftmost leaf that does.
  template <class Wanted>
  int64_t descend(int64_t t, Wanted wanted) const {
    const size_t block = base(t);
    size_t at = 0;
    for (size_t l = level_start_.size() - 1; l-- > 0;) {
      const int64_t* children = &node_[block + level_start_[l] + at * kFanout];
      size_t c = 0;
      while (!wanted(children[c])) ++c;
      at = at * kFanout + c;
    }
    return static_cast<int64_t>(at);
  }

  // Per tree, its levels one after another: level 0 the leaves, level l+1 the maximum of each run
  // of kFanout entries of level l, until one entry (the root). Every level is padded to a multiple
  // of kFanout with kNone.
  std::vector<size_t> level_start_;  // offset of each level within a tree's block
  std::vector<size_t> level_count_;  // real entries of each level
  size_t root_ = 0;                  // offset of the root within a tree's block
  size_t stride_ = 0;                // entries per tree (a multiple of kFanout)
  size_t origin_ = 0;                // first entry of tree 0, 64-byte aligned
  std::vector<int64_t> node_;
};

}  // namespace thdpack::detail
