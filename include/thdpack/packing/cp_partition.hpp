#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Context-parallel partition of a pack (SPEC §4, Transformer Engine compatible) and its inverse.
//
// Zigzag (default): every padded sequence of length Lp (a multiple of 2·cp) is cut into 2·cp chunks
// of Lp/(2·cp) rows; CP rank r keeps chunks r and 2·cp-1-r, sequence after sequence. Example, cp=2,
// padded lengths [8,4]: rank 0 holds global rows [0,1,6,7, 8,11], rank 1 holds [2,3,4,5, 9,10].
// Contiguous: rank r keeps rows [r·T/cp, (r+1)·T/cp).
// Per-row fields are sliced; metadata (cu_seqlens, cu_seqlens_padded, max_seqlen, sample ids) stays
// global, as attention kernels expect. Local boundaries are cu_seqlens_padded / cp.

#include <cstdint>
#include <span>
#include <vector>

#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/packing/thd_layout.hpp"

namespace thdpack {

/// The slice of a whole pack (cp_size 1) that CP rank `rank` of `cp` holds. Throws InvalidArgument
/// when the pack is already sliced, rank is out of range, its per-row fields differ in length or
/// disagree with cu_seqlens_padded, or the lengths are not divisible (see
/// ThdLayout::check_cp_divisible).
PackedBatch cp_slice(const PackedBatchView& whole, int cp, int rank, CpMode mode = CpMode::kZigzag);

/// The exact inverse: rebuilds the whole pack from the slices of ranks 0..cp-1 (in rank order).
/// Throws InvalidArgument when slices are missing, out of order, disagree on metadata, come from
/// different packs (source_digest, for slices cp_slice made), or a slice's per-row fields do not
/// all have its expected number of rows.
PackedBatch cp_unslice(std::span<const PackedBatchView> slices);

/// Global row index of every local row of CP rank `rank` (for tests and debugging).
std::vector<int64_t> cp_global_rows(const ThdLayout& layout, int cp, int rank,
                                    CpMode mode = CpMode::kZigzag);

/// Causal-attention work a set of global rows carries: a real row at position p of its sequence
/// attends to p+1 keys; padding rows do no work. Used to measure CP balance.
double causal_attention_work(const ThdLayout& layout, std::span<const RowRange> rows);

/// Work of each CP rank under `mode` (size cp).
std::vector<double> cp_attention_work(const ThdLayout& layout, int cp,
                                      CpMode mode = CpMode::kZigzag);

}  // namespace thdpack
