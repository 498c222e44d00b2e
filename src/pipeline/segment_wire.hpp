#pragma once
// How a segment's rows travel in a step's sample exchange and TP broadcast, and how either side
// puts them into a micro-batch.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pipeline/pack_segments.hpp"

namespace thdpack::detail {

/// The wire format of one step's sample exchange and TP broadcast. Every rank builds it from the
/// gathered batch, so senders and receivers agree on the size of every segment without sending
/// any.
///  - Rows, where some sample of the step carries its own labels or loss mask: a segment travels
///    as its packed rows of the stage's fields (wire_bytes: tokens, labels, loss mask), written by
///    LocalSamples::write.
///  - Tokens, where none does (pretraining data): a row's label is the next token and its loss
///    weight 1, except on the sample's last real row and on padding. So a segment travels as a
///    window of the sample's tokens, and no padding: its real rows' tokens where the stage holds
///    tokens, and the tokens its labels are where it holds labels (the real rows' successors; with
///    both, one window covers the two). That is 8 bytes per real row instead of up to 20 per row.
///    Either side lays the rows out as LocalSamples::write would.
class SegmentWire {
 public:
  SegmentWire(const GlobalBatch& batch, StageFields fields, const PackOptions& pack);

  bool tokens_only() const { return tokens_only_; }
  StageFields fields() const { return fields_; }

  /// Bytes segment `s` (not tail rows) takes on the wire.
  int64_t bytes(const Segment& s) const;
  /// Writes `s`, a segment of one of `local`'s samples, at `out` (bytes(s) bytes).
  void write(const LocalSamples& local, const Segment& s, std::byte* out) const;
  /// Tokens format: writes `s`, whose rows are `batch`'s from row `at` on (a micro-batch this
  /// stage filled), at `out` (bytes(s) bytes).
  void write_from_rows(const PackedBatch& batch, int64_t at, const Segment& s,
                       std::byte* out) const;
  /// Appends the rows of `s` received at `in` (written by either write) to `target`.
  void append_received(PackedBatch& target, const Segment& s, const std::byte* in) const;
  /// Appends the rows of `s`, a segment of one of `local`'s samples, to `target`.
  void append_local(PackedBatch& target, const Segment& s, const LocalSamples& local) const;
  /// Appends `length` tail rows (padding no sample supplies) to `target`.
  void append_tail(PackedBatch& target, int64_t length) const;

 private:
  // Tokens format: the window of s's sample's tokens that s travels as, from token s.offset +
  // first on.
  struct Window {
    int64_t first = 0;
    int64_t count = 0;
  };
  // Rows of s: `own` real ones from s.offset on, of which the first `labelled` have a next token.
  struct RealRows {
    int64_t own = 0;
    int64_t labelled = 0;
  };
  RealRows real_rows(const Segment& s) const;
  Window window(const Segment& s) const;
  // Tokens format: appends the rows of `s` given its real rows' tokens (`tokens`, read where the
  // stage holds tokens) and their successors (from tokens + next_at on, read where it holds
  // labels).
  void append_from_tokens(PackedBatch& target, const Segment& s, const int64_t* tokens,
                          int64_t next_at) const;

  std::span<const int64_t> real_lengths_;
  StageFields fields_;
  const PackOptions& pack_;
  bool tokens_only_;
};

/// What minimum_exchange_bytes counts for sample `p` of `batch` where it moves, over the stages
/// that exchange. Rows format: its padded rows' tokens (8 B each, first stage) and labels and loss
/// mask (12 B each, last stage). Tokens format: its real tokens (8 B each) for the first stage,
/// and the real - 1 tokens that are its labels for the last (one stage holding both at pp = 1).
int64_t minimum_moved_bytes(const GlobalBatch& batch, size_t p, const Topology& topology);

/// Fills a micro-batch from empty_microbatch: appends the rows of `segments` (its geometry's, in
/// order). Tail rows are padding; rows of a sample whose `source_of` is `me` come from `local`;
/// the others are read from `received` at `cursor[peer_of(source)]`, which advances by their
/// wire.bytes().
template <typename SourceOf, typename PeerOf>
void append_rows(PackedBatch& target, std::span<const Segment> segments, const SegmentWire& wire,
                 const LocalSamples& local, int me, SourceOf source_of, PeerOf peer_of,
                 const std::byte* received, std::vector<int64_t>& cursor) {
  for (const Segment& s : segments) {
    if (s.sample == Segment::kTailRows) {
      wire.append_tail(target, s.length);
      continue;
    }
    const int source = source_of(s.sample);
    if (source == me) {
      wire.append_local(target, s, local);
    } else {
      int64_t& c = cursor[static_cast<size_t>(peer_of(source))];
      wire.append_received(target, s, received + c);
      c += wire.bytes(s);
    }
  }
}

}  // namespace thdpack::detail
