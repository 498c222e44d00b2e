#pragma once
// Whether a batch's ids are dense enough for a table over their range: dataset indices of one
// global batch usually are, so lookups and duplicate checks by id take a vector, not a hash or a
// sort.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>

namespace thdpack::detail {

/// The range [lowest, lowest + slots) of some ids.
struct DenseIdRange {
  int64_t lowest = 0;
  uint64_t slots = 0;

  /// Where `id` sits in the range (>= slots when outside it).
  uint64_t offset(int64_t id) const {
    return static_cast<uint64_t>(id) - static_cast<uint64_t>(lowest);
  }
};

/// The range of `ids` where it has fewer than 8 slots per id; nothing for sparse ids or none.
/// Ids may span all of int64.
inline std::optional<DenseIdRange> dense_id_range(std::span<const int64_t> ids) {
  if (ids.empty()) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
  // hi - lo, not hi - lo + 1: ids spanning all of int64 would wrap that to 0.
  const auto span = static_cast<uint64_t>(*hi) - static_cast<uint64_t>(*lo);
  if (span >= 8 * static_cast<uint64_t>(ids.size())) return std::nullopt;
  return DenseIdRange{*lo, span + 1};
}

}  // namespace thdpack::detail
