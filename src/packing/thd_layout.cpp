#include "thdpack/packing/thd_layout.hpp"

#include <algorithm>

#include "thdpack/core/errors.hpp"

namespace thdpack {

ThdLayout::ThdLayout(std::span<const int32_t> cu_seqlens,
                     std::span<const int32_t> cu_seqlens_padded)
    : cu_(cu_seqlens), cu_padded_(cu_seqlens_padded) {
  if (cu_.empty() || cu_.size() != cu_padded_.size()) {
    fail("cu_seqlens (", cu_.size(), " entries) and cu_seqlens_padded (", cu_padded_.size(),
         ") must have the same number of entries, at least 1");
  }
  if (cu_[0] != 0 || cu_padded_[0] != 0) {
    throw InvalidArgument("cu_seqlens and cu_seqlens_padded must start at 0");
  }
  for (int64_t i = 0; i < num_sequences(); ++i) {
    if (real_length(i) < 0 || padded_length(i) < real_length(i)) {
      fail("sequence ", i, ": real length ", real_length(i), " and padded length ",
           padded_length(i), " must satisfy 0 <= real <= padded");
    }
  }
}

int64_t ThdLayout::max_padded_length() const {
  int64_t m = 0;
  for (int64_t i = 0; i < num_sequences(); ++i) m = std::max(m, padded_length(i));
  return m;
}

void ThdLayout::check_cp_divisible(int cp, CpMode mode) const {
  check(cp >= 1, "cp must be >= 1, got ", cp);
  if (mode == CpMode::kContiguous) {
    check(total_rows() % cp == 0, "contiguous CP split: ", total_rows(),
          " rows are not a multiple of cp=", cp);
    return;
  }
  if (cp == 1) return;  // the single rank owns both chunks of every sequence: all rows, in order
  for (int64_t i = 0; i < num_sequences(); ++i) {
    check(padded_length(i) % (2 * cp) == 0, "zigzag CP split: sequence ", i, " has padded length ",
          padded_length(i), ", not a multiple of 2*cp=", 2 * cp,
          "; pack with padding divisor 2*cp");
  }
}

std::vector<RowRange> ThdLayout::cp_rows(int cp, int rank, CpMode mode) const {
  check_cp_divisible(cp, mode);
  if (rank < 0 || rank >= cp) fail("CP rank ", rank, " outside [0, ", cp, ")");
  if (mode == CpMode::kContiguous || cp == 1) {
    const int64_t share = total_rows() / cp;
    return {RowRange{rank * share, share}};
  }
  std::vector<RowRange> rows;
  rows.reserve(static_cast<size_t>(2 * num_sequences()));
  for (int64_t i = 0; i < num_sequences(); ++i) {
    const int64_t chunk = padded_length(i) / (2 * cp);
    if (chunk == 0) continue;
    const int64_t base = padded_offset(i);
    rows.push_back({base + rank * chunk, chunk});
    rows.push_back({base + (2 * cp - 1 - rank) * chunk, chunk});
  }
  return rows;
}

}  // namespace thdpack
