#include "thdpack/bin_packing.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include "successor_set.hpp"
#include "thdpack/errors.hpp"

namespace thdpack {
namespace {

// Counting structures are indexed by remaining room; beyond this capacity they would cost more
// memory than they save time, and a balanced tree takes over.
constexpr int64_t kMaxIndexedCapacity = int64_t{1} << 26;

// Groups item indices by bin in the order they were placed.
Bins collect(const std::vector<int64_t>& placement_order, const std::vector<int64_t>& bin_of,
             int64_t bins) {
  Bins out;
  out.offsets.assign(static_cast<size_t>(bins) + 1, 0);
  for (int64_t item : placement_order) ++out.offsets[static_cast<size_t>(bin_of[static_cast<size_t>(item)]) + 1];
  std::partial_sum(out.offsets.begin(), out.offsets.end(), out.offsets.begin());
  std::vector<int64_t> cursor(out.offsets.begin(), out.offsets.end() - 1);
  out.items.resize(placement_order.size());
  for (int64_t item : placement_order) {
    const auto b = static_cast<size_t>(bin_of[static_cast<size_t>(item)]);
    out.items[static_cast<size_t>(cursor[b]++)] = item;
  }
  return out;
}

Bins best_fit_tree(std::span<const int64_t> lengths, int64_t capacity,
                   const std::vector<int64_t>& order) {
  std::set<std::pair<int64_t, int64_t>> open;  // (room, bin)
  std::vector<int64_t> bin_of(lengths.size());
  int64_t bins = 0;
  for (int64_t item : order) {
    const int64_t len = lengths[static_cast<size_t>(item)];
    auto it = open.lower_bound({len, -1});
    int64_t bin, room;
    if (it == open.end()) {
      bin = bins++;
      room = capacity;
    } else {
      bin = it->second;
      room = it->first;
      open.erase(it);
    }
    bin_of[static_cast<size_t>(item)] = bin;
    open.insert({room - len, bin});
  }
  return collect(order, bin_of, bins);
}

}  // namespace

void check_items_fit(std::span<const int64_t> lengths, int64_t capacity, const std::string& what) {
  if (capacity < 1) throw InvalidArgument("pack capacity must be >= 1, got " + std::to_string(capacity));
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1) {
      throw InvalidArgument(what + " " + std::to_string(i) + " has length " +
                            std::to_string(lengths[i]) + "; lengths must be >= 1");
    }
    if (lengths[i] > capacity) {
      throw InvalidArgument(what + " " + std::to_string(i) + " has " + std::to_string(lengths[i]) +
                            " tokens but the pack capacity (max_seqlen_per_dp_cp_rank x cp) is " +
                            std::to_string(capacity) +
                            "; raise --max-seqlen-per-dp-cp-rank or truncate");
    }
  }
}

std::vector<int64_t> order_by_decreasing_length(std::span<const int64_t> lengths, int64_t capacity) {
  const auto n = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  if (capacity <= 16 * n + 65536) {
    std::vector<int64_t> start(static_cast<size_t>(capacity) + 2, 0);
    // start[c] = number of items longer than c, i.e. the first slot of length c (descending).
    for (int64_t len : lengths) ++start[static_cast<size_t>(capacity - len) + 1];
    std::partial_sum(start.begin(), start.end(), start.begin());
    for (int64_t i = 0; i < n; ++i) {
      const auto slot = static_cast<size_t>(capacity - lengths[static_cast<size_t>(i)]);
      order[static_cast<size_t>(start[slot]++)] = i;
    }
    return order;
  }
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return lengths[static_cast<size_t>(a)] > lengths[static_cast<size_t>(b)];
  });
  return order;
}

Bins best_fit_decreasing(std::span<const int64_t> lengths, int64_t capacity) {
  check_items_fit(lengths, capacity, "item");
  const auto order = order_by_decreasing_length(lengths, capacity);
  if (capacity > kMaxIndexedCapacity) return best_fit_tree(lengths, capacity, order);

  // Bins with equal room are kept in an intrusive stack per room value; a successor set over room
  // values finds the least room >= the item's length.
  std::vector<int64_t> head(static_cast<size_t>(capacity) + 1, -1);
  std::vector<int64_t> next_in_room;
  std::vector<int64_t> room_of;
  detail::SuccessorSet rooms(capacity + 1);
  std::vector<int64_t> bin_of(lengths.size());
  next_in_room.reserve(lengths.size() / 2 + 1);
  room_of.reserve(lengths.size() / 2 + 1);

  auto push = [&](int64_t bin, int64_t room) {
    const auto r = static_cast<size_t>(room);
    next_in_room[static_cast<size_t>(bin)] = head[r];
    if (head[r] < 0) rooms.insert(room);
    head[r] = bin;
    room_of[static_cast<size_t>(bin)] = room;
  };
  for (int64_t item : order) {
    const int64_t len = lengths[static_cast<size_t>(item)];
    const int64_t room = rooms.next(len);
    int64_t bin;
    if (room < 0) {
      bin = static_cast<int64_t>(room_of.size());
      room_of.push_back(capacity);
      next_in_room.push_back(-1);
    } else {
      bin = head[static_cast<size_t>(room)];
      head[static_cast<size_t>(room)] = next_in_room[static_cast<size_t>(bin)];
      if (head[static_cast<size_t>(room)] < 0) rooms.erase(room);
    }
    bin_of[static_cast<size_t>(item)] = bin;
    push(bin, room_of[static_cast<size_t>(bin)] - len);
  }
  return collect(order, bin_of, static_cast<int64_t>(room_of.size()));
}

Bins first_fit_decreasing(std::span<const int64_t> lengths, int64_t capacity) {
  check_items_fit(lengths, capacity, "item");
  const auto order = order_by_decreasing_length(lengths, capacity);
  // Max-room segment tree over at most n bins; unopened bins have full room, so "leftmost bin
  // that fits" opens a new bin exactly when no open one fits.
  size_t leaves = 1;
  while (leaves < std::max<size_t>(lengths.size(), 1)) leaves *= 2;
  std::vector<int64_t> tree(2 * leaves, capacity);
  std::vector<int64_t> bin_of(lengths.size());
  int64_t bins = 0;
  for (int64_t item : order) {
    const int64_t len = lengths[static_cast<size_t>(item)];
    size_t node = 1;
    while (node < leaves) node = tree[2 * node] >= len ? 2 * node : 2 * node + 1;
    const auto bin = static_cast<int64_t>(node - leaves);
    bin_of[static_cast<size_t>(item)] = bin;
    bins = std::max(bins, bin + 1);
    tree[node] -= len;
    for (node /= 2; node >= 1; node /= 2) tree[node] = std::max(tree[2 * node], tree[2 * node + 1]);
  }
  return collect(order, bin_of, bins);
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
  return (total + capacity - 1) / capacity;
}

int64_t bins_lower_bound_l2(std::span<const int64_t> lengths, int64_t capacity) {
  check_items_fit(lengths, capacity, "item");
  if (lengths.empty()) return 0;
  std::vector<int64_t> sorted(lengths.begin(), lengths.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> prefix(sorted.size() + 1, 0);  // prefix[i] = sum of the i smallest
  for (size_t i = 0; i < sorted.size(); ++i) prefix[i + 1] = prefix[i] + sorted[i];
  const auto n = static_cast<int64_t>(sorted.size());
  // Number of items with length <= x.
  auto count_le = [&](int64_t x) {
    return static_cast<int64_t>(std::upper_bound(sorted.begin(), sorted.end(), x) - sorted.begin());
  };
  auto count_lt = [&](int64_t x) {
    return static_cast<int64_t>(std::lower_bound(sorted.begin(), sorted.end(), x) - sorted.begin());
  };
  const int64_t half = capacity / 2;  // items <= half are "small" (2w <= C)
  const int64_t small_end = count_le(half);
  int64_t best = 0;
  auto evaluate = [&](int64_t alpha) {
    const int64_t big_end = count_le(capacity - alpha);  // items <= C-α
    const int64_t j1 = n - big_end;
    const int64_t j2 = big_end - small_end;
    const int64_t j2_sum = prefix[static_cast<size_t>(big_end)] - prefix[static_cast<size_t>(small_end)];
    const int64_t j3_begin = count_lt(alpha);
    const int64_t j3_sum = prefix[static_cast<size_t>(small_end)] - prefix[static_cast<size_t>(j3_begin)];
    const int64_t spare = j2 * capacity - j2_sum;
    const int64_t extra = j3_sum > spare ? (j3_sum - spare + capacity - 1) / capacity : 0;
    best = std::max(best, j1 + j2 + extra);
  };
  evaluate(0);
  for (int64_t i = 0; i < small_end; ++i) {
    if (i == 0 || sorted[static_cast<size_t>(i)] != sorted[static_cast<size_t>(i) - 1]) {
      evaluate(sorted[static_cast<size_t>(i)]);
    }
  }
  return best;
}

}  // namespace thdpack
