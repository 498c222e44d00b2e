#include "schedule/length_order.hpp"

#include <algorithm>
#include <bit>
#include <numeric>
#include <optional>

namespace thdpack::detail {

namespace {

/// Counting-sort buckets over the lengths: bucket b holds the length top - b·2^shift (longest
/// first), 2^shift being the largest power of two that divides every length's distance from the
/// shortest (padded lengths share a divisor, so usually a few hundred buckets, each written in one
/// stream, found by a shift). Empty when there would be more than about 4n buckets.
struct Buckets {
  int64_t top;
  int shift;
  std::vector<size_t> start;  ///< bucket b is [start[b], start[b + 1]) of the ordered samples

  size_t of(int64_t length) const { return static_cast<size_t>((top - length) >> shift); }
};

std::optional<Buckets> length_buckets(std::span<const int64_t> padded_lengths) {
  const size_t n = padded_lengths.size();
  const auto [lo, hi] = std::minmax_element(padded_lengths.begin(), padded_lengths.end());
  uint64_t distances = 0;
  for (const int64_t length : padded_lengths) distances |= static_cast<uint64_t>(length - *lo);
  const int shift = distances == 0 ? 0 : std::countr_zero(distances);
  const int64_t buckets = ((*hi - *lo) >> shift) + 1;
  if (buckets > 4 * static_cast<int64_t>(n) + 1024) return std::nullopt;
  Buckets b{*hi, shift, std::vector<size_t>(static_cast<size_t>(buckets) + 1, 0)};
  for (const int64_t length : padded_lengths) ++b.start[b.of(length) + 1];
  std::partial_sum(b.start.begin(), b.start.end(), b.start.begin());
  return b;
}

}  // namespace

LengthGroups group_by_length(std::span<const int64_t> ids,
                             std::span<const int64_t> padded_lengths) {
  LengthGroups groups;
  const size_t n = padded_lengths.size();
  groups.ids.resize(n);
  groups.starts.push_back(0);
  if (n == 0) return groups;
  const std::optional<Buckets> buckets = length_buckets(padded_lengths);
  if (!buckets) {  // lengths too far apart for buckets: a comparison sort
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return padded_lengths[a] > padded_lengths[b] ||
             (padded_lengths[a] == padded_lengths[b] && ids[a] < ids[b]);
    });
    for (size_t k = 0; k < n; ++k) {
      const int64_t length = padded_lengths[order[k]];
      if (groups.lengths.empty() || groups.lengths.back() != length) {
        if (k > 0) groups.starts.push_back(k);
        groups.lengths.push_back(length);
      }
      groups.ids[k] = ids[order[k]];
    }
    groups.starts.push_back(n);
    return groups;
  }
  // One pass in input order writes each id into its bucket (sequential reads, a few hundred
  // write streams), rather than reading ids and lengths in length order (a cache miss each).
  std::vector<size_t> next(buckets->start.begin(), buckets->start.end() - 1);
  for (size_t i = 0; i < n; ++i) groups.ids[next[buckets->of(padded_lengths[i])]++] = ids[i];
  if (!std::is_sorted(ids.begin(), ids.end())) {  // ids ascending within each length
    for (size_t b = 0; b + 1 < buckets->start.size(); ++b) {
      std::sort(groups.ids.begin() + static_cast<std::ptrdiff_t>(buckets->start[b]),
                groups.ids.begin() + static_cast<std::ptrdiff_t>(buckets->start[b + 1]));
    }
  }
  for (size_t b = 0; b + 1 < buckets->start.size(); ++b) {
    if (buckets->start[b + 1] == buckets->start[b]) continue;
    groups.lengths.push_back(buckets->top - (static_cast<int64_t>(b) << buckets->shift));
    groups.starts.push_back(buckets->start[b + 1]);
  }
  return groups;
}

}  // namespace thdpack::detail
