#pragma once
// The geometry of a step as one CP rank sees it: for every pack of the plan, its metadata and the
// runs of sample rows ("segments") that make up this CP rank's local rows, in local order. Both the
// sending and the receiving side of the exchange walk the same segments, which is why no sizes or
// headers travel.

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::detail {

/// Rows [offset, offset + length) of the padded sample at `sample` (a position in the GlobalBatch).
struct Segment {
  /// `sample` of tail rows (static shapes): padding that no sample supplies and no rank sends.
  static constexpr int64_t kTailRows = -1;
  int64_t sample = 0;
  int64_t offset = 0;
  int64_t length = 0;
};

/// One pack as this CP rank holds it.
struct PackGeometry {
  std::vector<int32_t> cu_seqlens;
  std::vector<int32_t> cu_seqlens_padded;
  int64_t max_seqlen = 0;
  std::vector<int64_t> sample_ids;
  std::vector<Segment> segments;  ///< this CP rank's rows, in local order
  int64_t local_rows = 0;
};

/// The pack of the samples `ids` (in order) as CP rank `cp_rank` of `cp` holds it; `position`
/// maps a global id to its position in `batch`. Throws InternalError on an id missing from it.
PackGeometry pack_geometry(std::span<const int64_t> ids, const GlobalBatch& batch,
                           const std::unordered_map<int64_t, int64_t>& position,
                           const PackOptions& pack, int cp, int cp_rank, CpMode mode);

/// The packs of one step as the ranks of one CP coordinate see them, for any plan: entry (k, d) is
/// the slice that dp_cp index d·cp + cp_coordinate holds of its CP group in micro-batch k (in a
/// fixed-CP plan, CP rank cp_coordinate of DP replica d's pack; in a dynamic-CP plan, its rank in
/// a group of any size). The ranks of one DP group share a CP coordinate, so this is all that an
/// exchange over the DP group walks.
class StepGeometry {
 public:
  /// Every DP index (what a reader that serves the others needs).
  static constexpr int kEveryReplica = -1;

  /// Throws InternalError if the plan names an id missing from the batch. `pack` gives the tail
  /// alignment and fixed cu_seqlens entries of every pack. With `only_replica` >= 0 just that DP
  /// index's entries are made (a rank that exchanges nothing); pack(k, d) then takes only d =
  /// only_replica.
  StepGeometry(const GlobalBatch& batch, const Plan& plan, const PackOptions& pack,
               int cp_coordinate, CpMode mode, int only_replica = kEveryReplica);

  const PackGeometry& pack(int64_t k, int replica) const {
    return packs_[static_cast<size_t>(k * replicas_ + (replicas_ == 1 ? 0 : replica))];
  }
  /// DP rank that holds the sample at position `sample`.
  int source_of(int64_t sample) const { return source_[static_cast<size_t>(sample)]; }
  /// First position of DP rank d's samples.
  int64_t first_of(int d) const { return first_[static_cast<size_t>(d)]; }

 private:
  int replicas_;
  std::vector<PackGeometry> packs_;
  std::vector<int> source_;
  std::vector<int64_t> first_;
};

/// A micro-batch for `geometry` with metadata, padding mask and (with tokens) position ids filled;
/// the arrays of tokens, labels and loss mask (those of `fields`) are empty with room for the
/// rows, which append_rows (a reader's exchange) or the TP broadcast then put in, so no row is
/// zero-filled before it is written. Built in `storage` (an empty micro-batch whose arrays'
/// capacity is reused).
PackedBatch empty_microbatch(const PackGeometry& geometry, const GlobalBatch& batch,
                             StageFields fields, const PackOptions& pack, int cp, int cp_rank,
                             CpMode mode, PackedBatch storage = {});

/// Empties the per-row fields a stage does not hold (tokens and position ids, labels and loss
/// mask).
void keep_stage_fields(PackedBatch& batch, StageFields fields);

/// The sample cut to its first `real` tokens (with its loss mask or labels), or unchanged when it
/// is not longer.
Sample truncated(Sample sample, int64_t real);

/// Where rows go: one pointer per field carried (null for the fields not carried).
struct RowTargets {
  int64_t* tokens = nullptr;
  int64_t* labels = nullptr;
  float* loss_mask = nullptr;
};

/// Bytes `length` rows of `fields` take on the wire: tokens (8 each), labels (8 each), loss mask
/// (4 each, padded to a multiple of 8 so the next run stays 8-byte aligned).
int64_t wire_bytes(int64_t length, StageFields fields);
/// The targets of `length` rows of `fields` written at `out` in the wire layout (wire_bytes bytes);
/// the loss mask's alignment padding is zeroed here, so every byte on the wire is defined.
RowTargets wire_targets(std::byte* out, int64_t length, StageFields fields);
/// The targets of rows from `at` on in `batch`'s arrays of `fields`.
RowTargets batch_targets(PackedBatch& batch, int64_t at, StageFields fields);

/// This DP rank's samples as the source of their rows in any pack, written straight to where they
/// go (an exchange buffer or a micro-batch) without building a pack per sample.
class LocalSamples {
 public:
  /// `samples[i]` is the sample at batch position `first + i`; `real_lengths` are the batch's
  /// (a sample longer than its real length is cut, as truncated() does).
  LocalSamples(std::span<const SampleView> samples, int64_t first,
               std::span<const int64_t> real_lengths, const PackOptions& pack)
      : samples_(samples), first_(first), real_lengths_(real_lengths), pack_(pack) {}

  /// Writes rows [s.offset, s.offset + s.length) of the sample at batch position s.sample as
  /// pack_samples lays them out: its real rows, then padding up to a multiple of the divisor
  /// (pad_id tokens, ignore_id labels, loss mask 0); labels never cross the sample. Only the
  /// non-null targets are written.
  void write(const Segment& s, RowTargets out) const;
  /// The sample's tokens from row s.offset on (the offset clamped to the sample's end, which a
  /// segment of padding only may start past).
  const int64_t* tokens_at(const Segment& s) const;

 private:
  std::span<const SampleView> samples_;
  int64_t first_;
  std::span<const int64_t> real_lengths_;
  const PackOptions& pack_;
};

/// Writes rows [from, from + length) of `source`'s `fields` to `out` (wire_bytes bytes).
void write_rows(const PackedBatch& source, int64_t from, int64_t length, StageFields fields,
                std::byte* out);

/// Appends `length` tail rows (pad_id tokens, ignore_id labels, loss mask 0) to `target`.
void append_tail_rows(PackedBatch& target, int64_t length, StageFields fields,
                      const PackOptions& pack);
/// Appends the rows of `s` written by `local` to `target`.
void append_local_rows(PackedBatch& target, const Segment& s, StageFields fields,
                       const LocalSamples& local);
/// Appends `length` rows in the wire layout at `in` to `target`.
void append_received_rows(PackedBatch& target, const std::byte* in, int64_t length,
                          StageFields fields);

}  // namespace thdpack::detail
