#include "thdpack/packing/bin_packing.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include "packing/sorted_items.hpp"
#include "packing/successor_set.hpp"
#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace detail {

namespace {

// Inputs beyond this many items sort with an LSD radix sort: the counting sort's scatter writes
// to as many places as there are lengths and stops fitting in cache.
constexpr int64_t kRadixThreshold = int64_t{1} << 22;

// Stable LSD radix sort of (key = capacity - length, index) pairs, 8 bits per pass; every pass
// streams through memory.
SortedItems radix_sort_decreasing(std::span<const int64_t> lengths, int64_t capacity) {
  struct Entry {
    uint32_t key;
    uint32_t index;
  };
  const size_t n = lengths.size();
  std::vector<Entry> a(n), b(n);
  for (size_t i = 0; i < n; ++i)
    a[i] = {static_cast<uint32_t>(capacity - lengths[i]), static_cast<uint32_t>(i)};
  for (int shift = 0; (static_cast<uint64_t>(capacity) >> shift) > 0; shift += 8) {
    size_t count[257] = {};
    for (const Entry& e : a) ++count[((e.key >> shift) & 0xffu) + 1];
    for (size_t d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (const Entry& e : a) b[count[(e.key >> shift) & 0xffu]++] = e;
    a.swap(b);
  }
  std::vector<Entry>().swap(b);
  SortedItems sorted;
  sorted.order.resize(n);
  sorted.lengths.resize(n);
  for (size_t i = 0; i < n; ++i) {
    sorted.order[i] = a[i].index;
    sorted.lengths[i] = capacity - static_cast<int64_t>(a[i].key);
  }
  return sorted;
}

}  // namespace

SortedItems in_given_order(std::span<const int64_t> descending) {
  SortedItems sorted{std::vector<int64_t>(descending.size()),
                     std::vector<int64_t>(descending.begin(), descending.end())};
  std::iota(sorted.order.begin(), sorted.order.end(), int64_t{0});
  return sorted;
}

SortedItems sort_decreasing(std::span<const int64_t> lengths, int64_t capacity) {
  const auto n = static_cast<int64_t>(lengths.size());
  if (n >= kRadixThreshold && n < (int64_t{1} << 32) && capacity < (int64_t{1} << 32)) {
    return radix_sort_decreasing(lengths, capacity);
  }
  SortedItems sorted;
  sorted.order.resize(static_cast<size_t>(n));
  sorted.lengths.resize(static_cast<size_t>(n));
  if (capacity <= 16 * n + 65536) {
    // start[c] = number of items longer than c, the first slot of length c in descending order.
    // (32-bit counters: half the memory traffic; n < 2^31 here since C >= 1.)
    std::vector<int32_t> start(static_cast<size_t>(capacity) + 2, 0);
    for (int64_t len : lengths) ++start[static_cast<size_t>(capacity - len) + 1];
    std::partial_sum(start.begin(), start.end(), start.begin());
    for (int64_t len = capacity; len >= 1; --len) {
      const auto slot = static_cast<size_t>(capacity - len);
      std::fill(sorted.lengths.begin() + start[slot], sorted.lengths.begin() + start[slot + 1],
                len);
    }
    for (int64_t i = 0; i < n; ++i) {
      const auto slot = static_cast<size_t>(capacity - lengths[static_cast<size_t>(i)]);
      sorted.order[static_cast<size_t>(start[slot]++)] = i;
    }
    return sorted;
  }
  std::iota(sorted.order.begin(), sorted.order.end(), int64_t{0});
  std::stable_sort(sorted.order.begin(), sorted.order.end(), [&](int64_t a, int64_t b) {
    return lengths[static_cast<size_t>(a)] > lengths[static_cast<size_t>(b)];
  });
  for (int64_t i = 0; i < n; ++i) {
    sorted.lengths[static_cast<size_t>(i)] =
        lengths[static_cast<size_t>(sorted.order[static_cast<size_t>(i)])];
  }
  return sorted;
}

__extension__ using Int128 = __int128;

int64_t l2_bound_of_descending(std::span<const int64_t> descending, int64_t capacity) {
  const size_t n = descending.size();
  if (n == 0) return 0;
  // Read the descending array back to front as ascending, with running sums instead of prefix
  // arrays, so the bound needs no memory beyond its input (100M items and more).
  auto ascending = [&](size_t i) { return descending[n - 1 - i]; };
  const int64_t half = capacity / 2;  // items <= half are "small" (2w <= C)
  size_t small_end = 0;               // items <= half, counted from the small end
  int64_t small_sum = 0, big_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ascending(i) <= half) {
      small_sum += ascending(i);
      ++small_end;
    } else {
      big_sum += ascending(i);
    }
  }
  // α runs over 0 and the distinct small lengths, increasing: items > C-α leave J2 from the top,
  // items < α leave J3 from the bottom; both ends only move one way.
  size_t big_end = n, j3_begin = 0;
  int64_t j2_sum = big_sum, j3_sum = small_sum, best = 0;
  auto evaluate = [&](int64_t alpha) {
    while (big_end > small_end && ascending(big_end - 1) > capacity - alpha)
      j2_sum -= ascending(--big_end);
    while (j3_begin < small_end && ascending(j3_begin) < alpha) j3_sum -= ascending(j3_begin++);
    const auto j1 = static_cast<int64_t>(n - big_end);
    const auto j2 = static_cast<int64_t>(big_end - small_end);
    // j2 x C may not fit in int64 (C near INT64_MAX); 128 bits hold it and every term below.
    const Int128 spare = Int128{j2} * capacity - j2_sum;
    const int64_t extra =
        j3_sum > spare ? static_cast<int64_t>((j3_sum - spare + capacity - 1) / capacity) : 0;
    best = std::max(best, j1 + j2 + extra);
  };
  evaluate(0);
  for (size_t i = 0; i < small_end; ++i) {
    if (i == 0 || ascending(i) != ascending(i - 1)) evaluate(ascending(i));
  }
  return best;
}

}  // namespace detail

namespace {

// Counting structures are indexed by remaining room; beyond this capacity they would cost more
// memory than they save time, and a balanced tree takes over.
constexpr int64_t kMaxIndexedCapacity = int64_t{1} << 26;

// Groups items by bin, each bin in placement order; bin_seq[i] is the bin of the i-th placed item.
template <typename BinIndex>
Bins collect(const std::vector<int64_t>& order, const std::vector<BinIndex>& bin_seq,
             int64_t bins) {
  Bins out;
  out.offsets.assign(static_cast<size_t>(bins) + 1, 0);
  for (BinIndex bin : bin_seq) ++out.offsets[static_cast<size_t>(bin) + 1];
  std::partial_sum(out.offsets.begin(), out.offsets.end(), out.offsets.begin());
  std::vector<int64_t> cursor(out.offsets.begin(), out.offsets.end() - 1);
  out.items.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    out.items[static_cast<size_t>(cursor[static_cast<size_t>(bin_seq[i])]++)] = order[i];
  }
  return out;
}

// Best fit over a balanced tree of open bins, for capacities too large to index by room. Among bins
// with equal room it takes the one that reached that room most recently, as the indexed version
// does, so both give identical packings.
Bins best_fit_tree(const detail::SortedItems& sorted, int64_t capacity) {
  struct Open {
    int64_t room;
    int64_t recency;  // larger = reached this room later; ordered first among equal rooms
    int64_t bin;
    bool operator<(const Open& o) const {
      return room != o.room ? room < o.room : recency > o.recency;
    }
  };
  std::set<Open> open;
  std::vector<int64_t> bin_seq(sorted.order.size());
  int64_t bins = 0;
  for (size_t i = 0; i < sorted.lengths.size(); ++i) {
    const int64_t len = sorted.lengths[i];
    auto it = open.lower_bound({len, std::numeric_limits<int64_t>::max(), 0});
    int64_t bin, room;
    if (it == open.end()) {
      bin = bins++;
      room = capacity;
    } else {
      bin = it->bin;
      room = it->room;
      open.erase(it);
    }
    bin_seq[i] = bin;
    open.insert({room - len, static_cast<int64_t>(i), bin});
  }
  return collect(sorted.order, bin_seq, bins);
}

}  // namespace

void check_items_fit(std::span<const int64_t> lengths, int64_t capacity, const std::string& what,
                     const std::string& capacity_name, const std::string& remedy) {
  check(capacity >= 1, "pack capacity must be >= 1, got ", capacity);
  int64_t total = 0;  // in range: no sum of some of the lengths can overflow
  const std::string total_label = "the total length of the " + what + "s";
  for (size_t i = 0; i < lengths.size(); ++i) {
    check(lengths[i] >= 1, what, " ", i, " has length ", lengths[i], "; lengths must be >= 1");
    check(lengths[i] <= capacity, what, " ", i, " has ", lengths[i], " tokens but ", capacity_name,
          " is ", capacity, "; ", remedy);
    total = checked_add(total, lengths[i], total_label);
  }
}

std::vector<int64_t> order_by_decreasing_length(std::span<const int64_t> lengths,
                                                int64_t capacity) {
  check_items_fit(lengths, capacity, "item");  // the counting sort indexes by capacity - length
  return detail::sort_decreasing(lengths, capacity).order;
}

Bins best_fit_decreasing(std::span<const int64_t> lengths, int64_t capacity) {
  check_items_fit(lengths, capacity, "item");
  return detail::best_fit_decreasing_sorted(detail::sort_decreasing(lengths, capacity), capacity);
}

namespace {

// Whether the room-indexed best fit below serves these items (it costs O(C) memory and time: worth
// it only when C is not much larger than n); else best_fit_tree.
bool room_indexed(int64_t items, int64_t capacity) {
  return capacity <= kMaxIndexedCapacity && capacity <= 16 * items + 65536;
}

// Best-fit decreasing over lengths in decreasing order, calling placed(i, bin) for each; returns
// the bin count. Bins with equal room are kept in an intrusive stack per room value; a successor
// set over room values finds the least room >= the item's length. Rooms (<= 2^26) and bin numbers
// (< n) fit 32 bits, which keeps the room index small enough to stay in cache.
template <class Placed>
int64_t best_fit_walk(std::span<const int64_t> descending, int64_t capacity, Placed placed) {
  std::vector<int32_t> head(static_cast<size_t>(capacity) + 1, -1);
  std::vector<int32_t> next_in_room;
  std::vector<int32_t> room_of;
  detail::SuccessorSet rooms(capacity + 1);
  next_in_room.reserve(descending.size() / 2 + 1);
  room_of.reserve(descending.size() / 2 + 1);

  for (size_t i = 0; i < descending.size(); ++i) {
    const auto len = static_cast<int32_t>(descending[i]);
    const int64_t room = rooms.next(len);
    int32_t bin;
    if (room < 0) {
      bin = static_cast<int32_t>(room_of.size());
      room_of.push_back(static_cast<int32_t>(capacity));
      next_in_room.push_back(-1);
    } else {
      bin = head[static_cast<size_t>(room)];
      head[static_cast<size_t>(room)] = next_in_room[static_cast<size_t>(bin)];
      if (head[static_cast<size_t>(room)] < 0) rooms.erase(room);
    }
    placed(i, bin);
    const int32_t left = room_of[static_cast<size_t>(bin)] - len;
    next_in_room[static_cast<size_t>(bin)] = head[static_cast<size_t>(left)];
    if (head[static_cast<size_t>(left)] < 0) rooms.insert(left);
    head[static_cast<size_t>(left)] = bin;
    room_of[static_cast<size_t>(bin)] = left;
  }
  return static_cast<int64_t>(room_of.size());
}

}  // namespace

Bins detail::best_fit_decreasing_sorted(const SortedItems& sorted, int64_t capacity) {
  const auto n = static_cast<int64_t>(sorted.lengths.size());
  if (!room_indexed(n, capacity)) return best_fit_tree(sorted, capacity);
  std::vector<int32_t> bin_seq(sorted.lengths.size());
  const int64_t bins =
      best_fit_walk(sorted.lengths, capacity, [&](size_t i, int32_t bin) { bin_seq[i] = bin; });
  return collect(sorted.order, bin_seq, bins);
}

Bins detail::best_fit_decreasing_of_descending(std::span<const int64_t> descending,
                                               int64_t capacity) {
  return best_fit_decreasing_sorted(in_given_order(descending), capacity);
}
int64_t detail::best_fit_decreasing_count(std::span<const int64_t> descending, int64_t capacity) {
  const auto n = static_cast<int64_t>(descending.size());
  if (!room_indexed(n, capacity)) {
    SortedItems sorted{std::vector<int64_t>(descending.size()),
                       std::vector<int64_t>(descending.begin(), descending.end())};
    std::iota(sorted.order.begin(), sorted.order.end(), int64_t{0});
    return best_fit_tree(sorted, capacity).count();
  }
  return best_fit_walk(descending, capacity, [](size_t, int32_t) {});
}

Bins first_fit_decreasing(std::span<const int64_t> lengths, int64_t capacity) {
  check_items_fit(lengths, capacity, "item");
  return detail::first_fit_decreasing_sorted(detail::sort_decreasing(lengths, capacity), capacity);
}

Bins detail::first_fit_decreasing_sorted(const SortedItems& sorted, int64_t capacity) {
  // Max-room segment tree over at most n bins; unopened bins have full room, so "leftmost bin
  // that fits" opens a new bin exactly when no open one fits.
  size_t leaves = 1;
  while (leaves < std::max<size_t>(sorted.lengths.size(), 1)) leaves *= 2;
  std::vector<int64_t> tree(2 * leaves, capacity);
  std::vector<int64_t> bin_seq(sorted.lengths.size());
  int64_t bins = 0;
  for (size_t i = 0; i < sorted.lengths.size(); ++i) {
    const int64_t len = sorted.lengths[i];
    size_t node = 1;
    while (node < leaves) node = tree[2 * node] >= len ? 2 * node : 2 * node + 1;
    const auto bin = static_cast<int64_t>(node - leaves);
    bin_seq[i] = bin;
    bins = std::max(bins, bin + 1);
    tree[node] -= len;
    for (node /= 2; node >= 1; node /= 2) tree[node] = std::max(tree[2 * node], tree[2 * node + 1]);
  }
  return collect(sorted.order, bin_seq, bins);
}

Bins detail::first_fit_decreasing_of_descending(std::span<const int64_t> descending,
                                                int64_t capacity) {
  return first_fit_decreasing_sorted(in_given_order(descending), capacity);
}

Bins next_fit(std::span<const int64_t> lengths, int64_t capacity) {
  check_items_fit(lengths, capacity, "item");
  Bins out;
  out.items.resize(lengths.size());
  std::iota(out.items.begin(), out.items.end(), int64_t{0});
  int64_t used = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (i > 0 && used + lengths[i] > capacity) {
      out.offsets.push_back(static_cast<int64_t>(i));
      used = 0;
    }
    used += lengths[i];
  }
  if (!lengths.empty()) out.offsets.push_back(static_cast<int64_t>(lengths.size()));
  return out;
}

int64_t bins_lower_bound_l1(std::span<const int64_t> lengths, int64_t capacity) {
  check_items_fit(lengths, capacity, "item");
  const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  return total / capacity + (total % capacity != 0);
}

int64_t bins_lower_bound_l2(std::span<const int64_t> lengths, int64_t capacity) {
  check_items_fit(lengths, capacity, "item");
  return detail::l2_bound_of_descending(detail::sort_decreasing(lengths, capacity).lengths,
                                        capacity);
}

}  // namespace thdpack
