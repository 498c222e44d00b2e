#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// ThdLayout: the one accessor for THD offset arithmetic (docs/cu_seqlens.md).
//
// A pack of B sequences is described by two cumulative arrays of B+1 int32 entries:
//   cu_seqlens        real lengths, compact coordinates (what attention kernels read)
//   cu_seqlens_padded physical boundaries of each sequence in the buffer
// Sequence i occupies buffer rows [cu_seqlens_padded[i], cu_seqlens_padded[i+1]); its first
// real_length(i) rows are real tokens, the rest padding.
//
// Context parallelism (SPEC §4) cuts each padded sequence of length Lp (a multiple of 2·cp) into
// 2·cp chunks of Lp/(2·cp) rows; CP rank r owns chunks r and 2·cp-1-r ("zigzag"), sequence after
// sequence. In contiguous mode rank r owns rows [r·T/cp, (r+1)·T/cp) of the whole pack.
// The packer, the CP slicer and its inverse, and the tests all use this type.

#include <cstdint>
#include <span>
#include <vector>

namespace thdpack {

/// How a pack is split over the ranks of a CP group.
enum class CpMode {
  kZigzag,      ///< per sequence, chunks r and 2·cp-1-r (Transformer Engine's THD layout)
  kContiguous,  ///< rank r takes rows [r·T/cp, (r+1)·T/cp)
};

/// A contiguous run of rows of the global (unsliced) pack.
struct RowRange {
  int64_t begin = 0;
  int64_t length = 0;
  bool operator==(const RowRange&) const = default;
};

class ThdLayout {
 public:
  /// Borrows the arrays (they must outlive the layout). Throws InvalidArgument unless both have the
  /// same size >= 1, start at 0, are non-decreasing, and every padded length >= its real length.
  ThdLayout(std::span<const int32_t> cu_seqlens, std::span<const int32_t> cu_seqlens_padded);

  /// Number of sequences (entries - 1), including zero-length ones from fixed-size arrays.
  int64_t num_sequences() const { return static_cast<int64_t>(cu_.size()) - 1; }
  int64_t real_length(int64_t i) const { return cu_[i + 1] - cu_[i]; }
  int64_t padded_length(int64_t i) const { return cu_padded_[i + 1] - cu_padded_[i]; }
  /// First buffer row of sequence i.
  int64_t padded_offset(int64_t i) const { return cu_padded_[i]; }
  /// Offset of sequence i in compact (unpadded) coordinates.
  int64_t real_offset(int64_t i) const { return cu_[i]; }
  /// Rows of the buffer (sum of padded lengths, including tail padding).
  int64_t total_rows() const { return cu_padded_.back(); }
  int64_t total_real() const { return cu_.back(); }
  /// Largest padded length.
  int64_t max_padded_length() const;

  /// Rows of sequence i held by one CP rank: padded_length(i) / cp.
  int64_t cp_local_length(int64_t i, int cp) const { return padded_length(i) / cp; }
  /// First local row of sequence i on every CP rank: padded_offset(i) / cp.
  int64_t cp_local_offset(int64_t i, int cp) const { return padded_offset(i) / cp; }

  /// The global rows CP rank `rank` of `cp` owns, in its local order. Throws InvalidArgument when a
  /// padded length is not a multiple of 2·cp (zigzag) or the total not of cp (contiguous). With
  /// cp = 1 the one rank owns every row in order, whatever the lengths (packs for cp = 1 use
  /// padding divisor 1).
  std::vector<RowRange> cp_rows(int cp, int rank, CpMode mode) const;
  /// Throws InvalidArgument unless the layout can be split over `cp` ranks in `mode` (always
  /// possible for cp = 1).
  void check_cp_divisible(int cp, CpMode mode) const;

 private:
  std::span<const int32_t> cu_;
  std::span<const int32_t> cu_padded_;
};

}  // namespace thdpack
