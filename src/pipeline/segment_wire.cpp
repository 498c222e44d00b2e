#include "pipeline/segment_wire.hpp"

#include <algorithm>
#include <cstring>

namespace thdpack::detail {

SegmentWire::SegmentWire(const GlobalBatch& batch, StageFields fields, const PackOptions& pack)
    : real_lengths_(batch.real_lengths),
      fields_(fields),
      pack_(pack),
      tokens_only_(!batch.samples_carry_targets) {}

int64_t SegmentWire::tokens_needed(const Segment& s) const {
  const int64_t real = real_lengths_[static_cast<size_t>(s.sample)];
  const int64_t real_end = std::clamp(real, s.offset, s.offset + s.length);
  if (real_end == s.offset) return 0;  // padding only
  // A label is the next token, which for the segment's last real row may lie past it.
  return (fields_.labels ? std::min(real_end + 1, real) : real_end) - s.offset;
}

int64_t SegmentWire::bytes(const Segment& s) const {
  return tokens_only_ ? 8 * tokens_needed(s) : wire_bytes(s.length, fields_);
}

void SegmentWire::write(const LocalSamples& local, const Segment& s, std::byte* out) const {
  if (!tokens_only_) {
    local.write(s, wire_targets(out, s.length, fields_));
    return;
  }
  const auto n = static_cast<size_t>(tokens_needed(s));
  if (n > 0) std::memcpy(out, local.tokens_at(s), n * sizeof(int64_t));
}

void SegmentWire::append_received(PackedBatch& target, const Segment& s,
                                  const std::byte* in) const {
  if (!tokens_only_) {
    append_received_rows(target, in, s.length, fields_);
    return;
  }
  // The wire holds whole int64 values from an 8-byte aligned start (every segment's bytes are a
  // multiple of 8), so they are read in place.
  append_from_tokens(target, s, reinterpret_cast<const int64_t*>(in));
}

void SegmentWire::append_local(PackedBatch& target, const Segment& s,
                               const LocalSamples& local) const {
  if (tokens_only_) {
    append_from_tokens(target, s, local.tokens_at(s));
  } else {
    append_local_rows(target, s, fields_, local);
  }
}

void SegmentWire::append_tail(PackedBatch& target, int64_t length) const {
  append_tail_rows(target, length, fields_, pack_);
}

void SegmentWire::append_from_tokens(PackedBatch& target, const Segment& s,
                                     const int64_t* tokens) const {
  // LocalSamples::write for a sample without labels or loss mask: rows [offset, real_end) are
  // real, the rest padding; row j's label is token j + 1 with weight 1, except on the last real
  // row (real - 1), which has no next token.
  const int64_t real = real_lengths_[static_cast<size_t>(s.sample)];
  const int64_t real_end = std::clamp(real, s.offset, s.offset + s.length);
  const auto rows = static_cast<size_t>(s.length);
  if (fields_.tokens) {
    const auto own = static_cast<size_t>(real_end - s.offset);
    target.tokens.insert(target.tokens.end(), tokens, tokens + own);
    target.tokens.insert(target.tokens.end(), rows - own, pack_.pad_id);
  }
  if (fields_.labels) {
    const auto labelled =
        static_cast<size_t>(std::max<int64_t>(0, std::min(real_end, real - 1) - s.offset));
    if (labelled > 0) target.labels.insert(target.labels.end(), tokens + 1, tokens + 1 + labelled);
    target.labels.insert(target.labels.end(), rows - labelled, pack_.ignore_id);
    target.loss_mask.insert(target.loss_mask.end(), labelled, 1.0f);
    target.loss_mask.insert(target.loss_mask.end(), rows - labelled, 0.0f);
  }
}

int64_t minimum_rows(const GlobalBatch& batch, size_t p) {
  return batch.samples_carry_targets ? batch.padded_lengths[p] : batch.real_lengths[p];
}

int64_t minimum_row_bytes(const GlobalBatch& batch, const Topology& topology) {
  if (batch.samples_carry_targets) return 8 + 8 + 4;
  return topology.pp() > 1 ? 2 * 8 : 8;
}

}  // namespace thdpack::detail
