#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Offline bin packing of lengths into packs of capacity C, and lower bounds on the number of packs.
//
// All packers are deterministic: items are taken in decreasing length with ties by index (or in
// input order for next-fit), and a pack is chosen by a fixed rule. Every item must satisfy
// 1 <= length <= capacity, else InvalidArgument names the first offending item.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "thdpack/core/oversize_fix.hpp"

namespace thdpack {

/// Packs as index lists: pack p holds items[offsets[p] .. offsets[p+1]).
struct Bins {
  std::vector<int64_t> offsets{0};
  std::vector<int64_t> items;

  int64_t count() const { return static_cast<int64_t>(offsets.size()) - 1; }
  std::span<const int64_t> bin(int64_t p) const {
    return std::span<const int64_t>(items).subspan(
        static_cast<size_t>(offsets[static_cast<size_t>(p)]),
        static_cast<size_t>(offsets[static_cast<size_t>(p) + 1] - offsets[static_cast<size_t>(p)]));
  }
};

/// Best-fit decreasing: each item (longest first) goes to the pack with the least room that still
/// fits it. Runs in O(n + C) with a capacity-indexed successor structure (no per-pack scan).
Bins best_fit_decreasing(std::span<const int64_t> lengths, int64_t capacity);

/// First-fit decreasing: each item (longest first) goes to the lowest-numbered pack that fits it.
/// O(n log n) with a max-room tree over packs.
Bins first_fit_decreasing(std::span<const int64_t> lengths, int64_t capacity);

/// Next-fit in input order (Megatron's packer): append while the pack has room, else open a new
/// one.
Bins next_fit(std::span<const int64_t> lengths, int64_t capacity);

/// L1 bound: ceil(Σ lengths / C).
int64_t bins_lower_bound_l1(std::span<const int64_t> lengths, int64_t capacity);

/// Martello–Toth L2 bound (>= L1): for every α in [0, C/2], items larger than C-α need a pack
/// each, items in (C/2, C-α] too, and items in [α, C/2] fill the room those leave before opening
/// more packs. O(n + C).
int64_t bins_lower_bound_l2(std::span<const int64_t> lengths, int64_t capacity);

/// Items sorted by decreasing length, ties by increasing index (stable). O(n + C) counting sort
/// when C is small relative to n, else a comparison sort.
std::vector<int64_t> order_by_decreasing_length(std::span<const int64_t> lengths, int64_t capacity);

/// Throws InvalidArgument unless capacity >= 1 and 1 <= lengths[i] <= capacity for every i;
/// `what` names the items in the message ("sample", "group"); `capacity_name` and `remedy` say
/// what the capacity is and how to fix an item that does not fit.
void check_items_fit(
    std::span<const int64_t> lengths, int64_t capacity, const std::string& what,
    const std::string& capacity_name = "the pack capacity (max_seqlen_per_dp_cp_rank x cp)",
    const std::string& remedy = kOversizeFix);

}  // namespace thdpack
