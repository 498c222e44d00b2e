#pragma once
// Items sorted by decreasing length, shared by the packers, the L2 bound and the balanced
// scheduler so that one sort serves all of them.

#include <cstdint>
#include <span>
#include <vector>

#include "thdpack/packing/bin_packing.hpp"

namespace thdpack::detail {

/// Items in decreasing length (ties by increasing index) and their lengths in that order. Reading
/// lengths through `order` would miss the cache once per item on large inputs; the counting sort
/// writes them sequentially instead.
struct SortedItems {
  std::vector<int64_t> order;
  std::vector<int64_t> lengths;
};

/// Counting sort when the capacity is small relative to n, else a stable comparison sort. Lengths
/// must be in [1, capacity].
SortedItems sort_decreasing(std::span<const int64_t> lengths, int64_t capacity);

/// Best-fit decreasing over items already sorted (best_fit_decreasing without the sort).
Bins best_fit_decreasing_sorted(const SortedItems& sorted, int64_t capacity);

/// Lengths already in decreasing order (ties by index), as sort_decreasing would give them.
SortedItems in_given_order(std::span<const int64_t> descending);

/// best_fit_decreasing and first_fit_decreasing of lengths already in decreasing order (items
/// numbered by their position), without sorting them again.
Bins best_fit_decreasing_of_descending(std::span<const int64_t> descending, int64_t capacity);
Bins first_fit_decreasing_of_descending(std::span<const int64_t> descending, int64_t capacity);

/// First-fit decreasing over items already sorted (first_fit_decreasing without the sort).
Bins first_fit_decreasing_sorted(const SortedItems& sorted, int64_t capacity);

/// The number of packs best_fit_decreasing_sorted makes of lengths given in decreasing order,
/// without recording which item went where (a fraction of its memory and time).
int64_t best_fit_decreasing_count(std::span<const int64_t> descending, int64_t capacity);

/// The Martello–Toth L2 bound of lengths given in decreasing order (no extra memory).
int64_t l2_bound_of_descending(std::span<const int64_t> descending, int64_t capacity);

}  // namespace thdpack::detail
