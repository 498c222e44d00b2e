#include "schedule/length_order.hpp"

#include <algorithm>
#include <bit>
#include <numeric>

namespace thdpack::detail {

std::vector<size_t> order_by_length(std::span<const int64_t> ids,
                                    std::span<const int64_t> padded_lengths) {
  const size_t n = padded_lengths.size();
  std::vector<size_t> order(n);
  if (n == 0) return order;
  const auto [lo, hi] = std::minmax_element(padded_lengths.begin(), padded_lengths.end());
  // One bucket per multiple of the largest power of two dividing every length's distance from the
  // shortest: padded lengths share a divisor, so usually a few hundred buckets, each written in
  // one stream, found by a shift.
  uint64_t distances = 0;
  for (const int64_t length : padded_lengths) distances |= static_cast<uint64_t>(length - *lo);
  const int shift = distances == 0 ? 0 : std::countr_zero(distances);
  const int64_t buckets = ((*hi - *lo) >> shift) + 1;
  if (buckets > 4 * static_cast<int64_t>(n) + 1024) {
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return padded_lengths[a] > padded_lengths[b] ||
             (padded_lengths[a] == padded_lengths[b] && ids[a] < ids[b]);
    });
    return order;
  }
  // Bucket b holds the length hi - b·2^shift: longest first. Samples keep their input order in a
  // bucket, which is id order when the ids ascend; otherwise each bucket is sorted by id.
  auto bucket_of = [top = *hi, shift](int64_t length) {
    return static_cast<size_t>((top - length) >> shift);
  };
  std::vector<size_t> start(static_cast<size_t>(buckets) + 1, 0);
  for (const int64_t length : padded_lengths) ++start[bucket_of(length) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<size_t> next(start.begin(), start.end() - 1);
  for (size_t i = 0; i < n; ++i) order[next[bucket_of(padded_lengths[i])]++] = i;
  if (!std::is_sorted(ids.begin(), ids.end())) {
    for (size_t b = 0; b + 1 < start.size(); ++b) {
      std::sort(order.begin() + static_cast<std::ptrdiff_t>(start[b]),
                order.begin() + static_cast<std::ptrdiff_t>(start[b + 1]),
                [&](size_t x, size_t y) { return ids[x] < ids[y]; });
    }
  }
  return order;
}

}  // namespace thdpack::detail
