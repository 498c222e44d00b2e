#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// THD packing (SPEC §3): several samples concatenated into one row of T tokens with cu_seqlens
// metadata.
//
// For each sample, position j's label is token j+1 of the same sample; the last position of a
// sample has no label (label = ignore id, loss_mask 0) unless the sample carries shifted labels.
// Labels never cross sample boundaries. Each sample is padded to a multiple of the padding divisor.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/packing/thd_layout.hpp"

namespace thdpack {

/// What decides the padding divisor d.
struct PaddingSpec {
  int cp = 1;
  int tp = 1;
  bool sequence_parallel = false;  ///< multiply by tp
  bool dynamic_cp = false;         ///< pad for every CP group size of dp·cp ranks (below)
  int dp = 1;                      ///< only read with dynamic_cp
  int min_cp = 1;                  ///< only read with dynamic_cp: the smallest CP group
};

/// d = (2·cp if cp > 1 else 1) · (tp if sequence parallel). With dynamic CP, 2·cp is replaced by
/// 2·lcm of every CP group size a plan over G = dp·cp ranks may use (G, the powers of two and
/// min_cp times the powers of two, each from min_cp up to G), so every group can zigzag-slice
/// every sample into 2·size equal chunks: 2·G when G and min_cp are powers of two (Megatron's
/// 2·dp·cp), 4·G for G = 6, say (groups of 4 and 6). Throws InvalidArgument on sizes < 1 and on
/// a divisor that overflows int64.
int64_t padding_divisor(const PaddingSpec& spec);

/// `length` rounded up to a multiple of `divisor` (both >= 1); InvalidArgument when the padded
/// length does not fit in int64.
inline int64_t round_up(int64_t length, int64_t divisor) {
  return checked_add(length, divisor - 1, "padded length") / divisor * divisor;
}

/// One sample as packing input. Spans are borrowed; loss_mask and labels may be empty.
struct SampleView {
  int64_t id = 0;
  std::span<const int64_t> input_ids;
  std::span<const float> loss_mask;
  std::span<const int64_t> labels;
  bool labels_shifted = false;
};

/// A view of a dataset Sample (which must outlive it).
SampleView view_of(const Sample& sample);

/// Position ids of padding rows.
enum class PadPositions {
  kContinue,  ///< keep counting within the sample (Megatron)
  kZero,      ///< 0 on every padding row (sanitized)
};

/// Static-shape padding of the whole pack.
enum class TailAlign {
  kNone,      ///< T = sum of padded lengths
  kMultiple,  ///< T rounded up to a multiple of PackOptions::tail_multiple
  kCapacity,  ///< T = PackOptions::capacity exactly
};

/// Where the tail padding goes.
enum class TailPolicy {
  kAppendDummySeq,  ///< one extra all-padding sequence (real length 0)
  kExtendLast,      ///< stretch the last padded boundary
};

/// "none", "multiple", "capacity" and back; parse_tail_align throws InvalidArgument on other names.
std::string tail_align_name(TailAlign align);
TailAlign parse_tail_align(const std::string& name);
/// "append_dummy_seq", "extend_last" and back; parse_tail_policy throws InvalidArgument otherwise.
std::string tail_policy_name(TailPolicy policy);
TailPolicy parse_tail_policy(const std::string& name);

struct PackOptions {
  int64_t divisor = 1;       ///< padding divisor d (padding_divisor())
  int64_t capacity = 0;      ///< C = M·cp; packs of several samples must fit. 0: unchecked
  int64_t pad_id = 0;        ///< token id on padding rows
  int64_t ignore_id = -100;  ///< label on rows without a target
  /// Labels are ignore_id wherever the loss mask is 0 too (a prompt masked by loss_mask): a loss
  /// with ignore_index and no mask then skips exactly what the mask skips.
  bool ignore_masked_labels = false;
  PadPositions pad_positions = PadPositions::kContinue;
  TailAlign tail_align = TailAlign::kNone;
  int64_t tail_multiple = 0;  ///< N for TailAlign::kMultiple; must be a multiple of divisor
  TailPolicy tail_policy = TailPolicy::kAppendDummySeq;
  /// If > 0, cu_seqlens arrays have exactly this many entries (the last value repeated); more
  /// sequences than that is an error.
  int64_t fixed_cu_seqlens_entries = 0;
};

/// A borrowed view of a pack (see PackedBatch for the fields).
struct PackedBatchView {
  std::span<const int64_t> tokens;
  std::span<const int64_t> labels;
  std::span<const float> loss_mask;
  std::span<const int64_t> position_ids;
  std::span<const uint8_t> padding_mask;
  std::span<const int32_t> cu_seqlens;
  std::span<const int32_t> cu_seqlens_padded;
  int64_t max_seqlen = 0;
  std::span<const int64_t> sample_ids;
  int cp_size = 1;
  int cp_rank = 0;
  CpMode cp_mode = CpMode::kZigzag;
  uint64_t source_digest = 0;  ///< see PackedBatch::source_digest

  ThdLayout layout() const { return ThdLayout(cu_seqlens, cu_seqlens_padded); }
  /// Rows held (the padding mask is present in every pack, also in one restricted to the fields a
  /// pipeline stage needs).
  int64_t num_rows() const { return static_cast<int64_t>(padding_mask.size()); }
};

/// An owning pack. Per-row fields have the same length (T rows, or T/cp on a CP rank); metadata is
/// always global: cu arrays, max_seqlen and sample ids are those of the whole pack.
struct PackedBatch {
  std::vector<int64_t> tokens;
  std::vector<int64_t> labels;
  std::vector<float> loss_mask;
  std::vector<int64_t> position_ids;  ///< restart at 0 for every sequence
  std::vector<uint8_t> padding_mask;  ///< 1 on padding rows
  std::vector<int32_t> cu_seqlens;    ///< B+1 (or fixed) entries, real lengths
  std::vector<int32_t> cu_seqlens_padded;
  int64_t max_seqlen = 0;           ///< largest padded sequence length in the pack
  std::vector<int64_t> sample_ids;  ///< global ids of the B samples, in pack order
  int cp_size = 1;                  ///< 1 for a whole pack
  int cp_rank = 0;
  CpMode cp_mode = CpMode::kZigzag;
  /// A slice made by cp_slice: a digest of the per-row fields of the whole pack it was cut from,
  /// so that cp_unslice refuses slices of two packs with equal metadata. 0: not known.
  uint64_t source_digest = 0;

  PackedBatchView view() const;
  ThdLayout layout() const { return ThdLayout(cu_seqlens, cu_seqlens_padded); }
  /// Rows held (see PackedBatchView::num_rows).
  int64_t num_rows() const { return static_cast<int64_t>(padding_mask.size()); }
};

/// Rows T of a pack whose sequences take `rows` padded rows, after the tail alignment of
/// `options`. Throws InvalidArgument when the tail options are inconsistent (tail_multiple not a
/// positive multiple of the divisor, capacity alignment without a capacity that is one), the
/// alignment takes a pack that fits past the capacity, or T would overflow int32.
int64_t aligned_pack_rows(int64_t rows, const PackOptions& options);

/// With options.fixed_cu_seqlens_entries > 0, extends both cu arrays (equal sizes, B+1 entries) to
/// exactly that many entries by repeating their last values; InvalidArgument when they already hold
/// more. Otherwise leaves them as they are.
void fix_cu_seqlens_entries(std::vector<int32_t>& cu_seqlens,
                            std::vector<int32_t>& cu_seqlens_padded, const PackOptions& options);

/// Throws InvalidArgument when `sample` is empty or its loss_mask/labels (when given) length
/// differs from its input_ids (the per-sample check of pack_samples).
void validate_sample(const SampleView& sample);

/// Packs `samples` in the given order. Throws InvalidArgument when a sample is empty, its
/// loss_mask/labels length differs from its input_ids, the padded total exceeds options.capacity
/// (for a single sample too: raise the capacity or truncate), T would overflow int32, or the tail
/// options are inconsistent (tail_multiple not a multiple of the divisor, tail alignment past the
/// capacity, capacity too small, more sequences than fixed_cu_seqlens_entries - 1).
PackedBatch pack_samples(std::span<const SampleView> samples, const PackOptions& options);

/// Checks every SPEC §3 invariant of a whole (cp_size 1) pack and throws InternalError naming the
/// first broken one: field sizes, cu arrays, divisibility of padded lengths by `divisor`,
/// max_seqlen, padding mask and labels on padding rows, positions restarting per sequence.
void check_pack_invariants(const PackedBatchView& pack, const PackOptions& options);

}  // namespace thdpack
