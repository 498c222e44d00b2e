#include "pipeline/segment_wire.hpp"

#include <algorithm>
#include <cstring>

namespace thdpack::detail {

SegmentWire::SegmentWire(const GlobalBatch& batch, StageFields fields, const PackOptions& pack)
    : real_lengths_(batch.real_lengths),
      fields_(fields),
      pack_(pack),
      tokens_only_(!batch.samples_carry_targets) {}

SegmentWire::RealRows SegmentWire::real_rows(const Segment& s) const {
  // As LocalSamples::write: rows from the sample's real length on are padding, and its last real
  // row (real - 1) has no next token.
  const int64_t real = real_lengths_[static_cast<size_t>(s.sample)];
  const int64_t real_end = std::clamp(real, s.offset, s.offset + s.length);
  return {real_end - s.offset, std::max<int64_t>(0, std::min(real_end, real - 1) - s.offset)};
}

SegmentWire::Window SegmentWire::window(const Segment& s) const {
  const RealRows r = real_rows(s);
  if (fields_.tokens && fields_.labels) {
    // The real rows' tokens and the one after the last labelled row (the real rows' own tokens
    // where the last real row is the sample's, one more where it is not).
    return {0, r.own > 0 ? r.labelled + 1 : 0};
  }
  if (fields_.tokens) return {0, r.own};
  if (fields_.labels) return {1, r.labelled};
  return {};
}

int64_t SegmentWire::bytes(const Segment& s) const {
  return tokens_only_ ? 8 * window(s).count : wire_bytes(s.length, fields_);
}

void SegmentWire::write(const LocalSamples& local, const Segment& s, std::byte* out) const {
  if (!tokens_only_) {
    local.write(s, wire_targets(out, s.length, fields_));
    return;
  }
  const Window w = window(s);
  if (w.count > 0) {
    std::memcpy(out, local.tokens_at(s) + w.first, static_cast<size_t>(w.count) * 8);
  }
}

void SegmentWire::write_from_rows(const PackedBatch& batch, int64_t at, const Segment& s,
                                  std::byte* out) const {
  const Window w = window(s);
  if (w.count == 0) return;
  const auto a = static_cast<size_t>(at);
  auto* tokens = reinterpret_cast<int64_t*>(out);
  if (!fields_.tokens) {
    // The successors of the labelled rows are their labels.
    std::memcpy(tokens, batch.labels.data() + a, static_cast<size_t>(w.count) * 8);
    return;
  }
  const RealRows r = real_rows(s);
  std::memcpy(tokens, batch.tokens.data() + a, static_cast<size_t>(r.own) * 8);
  // The token after the real rows, which this stage holds as the last real row's label.
  if (w.count > r.own) tokens[r.own] = batch.labels[a + static_cast<size_t>(r.own) - 1];
}

void SegmentWire::append_received(PackedBatch& target, const Segment& s,
                                  const std::byte* in) const {
  if (!tokens_only_) {
    append_received_rows(target, in, s.length, fields_);
    return;
  }
  // Whole int64 values from an 8-byte aligned start (every segment's bytes are a multiple of 8),
  // read in place; a labels-only stage's window starts at the first successor.
  append_from_tokens(target, s, reinterpret_cast<const int64_t*>(in), fields_.tokens ? 1 : 0);
}

void SegmentWire::append_local(PackedBatch& target, const Segment& s,
                               const LocalSamples& local) const {
  if (tokens_only_) {
    append_from_tokens(target, s, local.tokens_at(s), 1);
  } else {
    append_local_rows(target, s, fields_, local);
  }
}

void SegmentWire::append_tail(PackedBatch& target, int64_t length) const {
  append_tail_rows(target, length, fields_, pack_);
}

void SegmentWire::append_from_tokens(PackedBatch& target, const Segment& s, const int64_t* tokens,
                                     int64_t next_at) const {
  // LocalSamples::write for a sample without labels or loss mask: the real rows' tokens, then
  // padding; each labelled row's label is its next token, with weight 1, the other rows' the
  // ignore id with weight 0.
  const RealRows r = real_rows(s);
  const auto rows = static_cast<size_t>(s.length);
  if (fields_.tokens) {
    const auto own = static_cast<size_t>(r.own);
    target.tokens.insert(target.tokens.end(), tokens, tokens + own);
    target.tokens.insert(target.tokens.end(), rows - own, pack_.pad_id);
  }
  if (fields_.labels) {
    const auto labelled = static_cast<size_t>(r.labelled);
    if (labelled > 0) {
      const int64_t* next = tokens + next_at;  // formed only where it points into the window
      target.labels.insert(target.labels.end(), next, next + labelled);
    }
    target.labels.insert(target.labels.end(), rows - labelled, pack_.ignore_id);
    target.loss_mask.insert(target.loss_mask.end(), labelled, 1.0f);
    target.loss_mask.insert(target.loss_mask.end(), rows - labelled, 0.0f);
  }
}

int64_t minimum_moved_bytes(const GlobalBatch& batch, size_t p, const Topology& topology) {
  if (batch.samples_carry_targets) return (8 + 8 + 4) * batch.padded_lengths[p];
  const int64_t real = batch.real_lengths[p];
  return topology.pp() > 1 ? 8 * real + 8 * (real - 1) : 8 * real;
}

}  // namespace thdpack::detail
