#pragma once
// Samples in order of padded length, longest first: the order Megatron's dynamic-CP scheduler
// visits them in, and the order template plans cut into blocks.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace thdpack::detail {

/// The samples' ids grouped by padded length, longest first: group g has length lengths[g]
/// (descending) and ids[starts[g] .. starts[g + 1]) (ascending). Linear time (a counting sort)
/// where the lengths, in steps of the largest power of two that divides their differences, span
/// at most about 4n values (padded lengths do); a comparison sort otherwise.
struct LengthGroups {
  std::vector<int64_t> lengths;
  std::vector<size_t> starts;  ///< lengths.size() + 1 entries
  std::vector<int64_t> ids;
};
LengthGroups group_by_length(std::span<const int64_t> ids, std::span<const int64_t> padded_lengths);

}  // namespace thdpack::detail
