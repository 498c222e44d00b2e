#include "pipeline/pack_segments.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "thdpack/core/errors.hpp"

namespace thdpack::detail {

PackGeometry pack_geometry(std::span<const int64_t> ids, const GlobalBatch& batch,
                           const std::unordered_map<int64_t, int64_t>& position,
                           const PackOptions& pack, int cp, int cp_rank, CpMode mode) {
  PackGeometry g;
  std::vector<int64_t> positions;
  positions.reserve(ids.size());
  g.cu_seqlens.push_back(0);
  g.cu_seqlens_padded.push_back(0);
  for (int64_t id : ids) {
    const auto it = position.find(id);
    check<InternalError>(it != position.end(), "plan names sample ", id, " missing from the batch");
    const auto p = static_cast<size_t>(it->second);
    positions.push_back(it->second);
    g.cu_seqlens.push_back(g.cu_seqlens.back() + static_cast<int32_t>(batch.real_lengths[p]));
    g.cu_seqlens_padded.push_back(g.cu_seqlens_padded.back() +
                                  static_cast<int32_t>(batch.padded_lengths[p]));
    g.max_seqlen = std::max(g.max_seqlen, batch.padded_lengths[p]);
    g.sample_ids.push_back(id);
  }
  // Static shapes: the tail rows belong to no sample (an all-padding sequence, or the stretched
  // end of the last one).
  std::vector<int64_t> backed;  // rows of each sequence that its sample supplies
  for (int64_t p : positions) backed.push_back(batch.padded_lengths[static_cast<size_t>(p)]);
  const int64_t rows = g.cu_seqlens_padded.back();
  const int64_t total = aligned_pack_rows(rows, pack);
  if (total > rows) {
    if (pack.tail_policy == TailPolicy::kExtendLast && !ids.empty()) {
      g.cu_seqlens_padded.back() = static_cast<int32_t>(total);
      g.max_seqlen = std::max(g.max_seqlen, total - g.cu_seqlens_padded.end()[-2]);
    } else {
      g.cu_seqlens.push_back(g.cu_seqlens.back());
      g.cu_seqlens_padded.push_back(static_cast<int32_t>(total));
      g.max_seqlen = std::max(g.max_seqlen, total - rows);
      positions.push_back(Segment::kTailRows);
      backed.push_back(0);
    }
  }
  // This CP rank's global rows, cut at sample boundaries (and where a sample's rows end).
  const ThdLayout layout(g.cu_seqlens, g.cu_seqlens_padded);
  for (const RowRange& range : layout.cp_rows(cp, cp_rank, mode)) {
    int64_t row = range.begin;
    const int64_t end = range.begin + range.length;
    auto seq = std::upper_bound(g.cu_seqlens_padded.begin(), g.cu_seqlens_padded.end(), row) -
               g.cu_seqlens_padded.begin() - 1;
    while (row < end) {
      const int64_t seq_end = g.cu_seqlens_padded[static_cast<size_t>(seq) + 1];
      const auto q = static_cast<size_t>(seq);
      const int64_t offset = row - g.cu_seqlens_padded[q];
      // Rows of the sample, then (stretched last sequence) tail rows.
      const int64_t take = std::min(end, seq_end) - row;
      const int64_t from_sample =
          std::clamp(backed[q] - offset, int64_t{0}, std::max(take, int64_t{0}));
      if (from_sample > 0) g.segments.push_back({positions[q], offset, from_sample});
      if (take > from_sample) {
        g.segments.push_back({Segment::kTailRows, offset + from_sample, take - from_sample});
      }
      g.local_rows += std::max<int64_t>(take, 0);
      row += take;
      ++seq;
    }
  }
  fix_cu_seqlens_entries(g.cu_seqlens, g.cu_seqlens_padded, pack);
  return g;
}

StepGeometry::StepGeometry(const GlobalBatch& batch, const Plan& plan, const PackOptions& pack,
                           int cp_coordinate, CpMode mode, int only_replica)
    : replicas_(only_replica == kEveryReplica ? plan.dp() : 1) {
  std::unordered_map<int64_t, int64_t> position;
  position.reserve(batch.ids.size() * 2);
  for (size_t i = 0; i < batch.ids.size(); ++i)
    position.emplace(batch.ids[i], static_cast<int64_t>(i));
  const int first = only_replica == kEveryReplica ? 0 : only_replica;
  packs_.reserve(static_cast<size_t>(plan.num_microbatches() * replicas_));
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    const MicrobatchView microbatch = plan.microbatch(k);
    auto at_group = microbatch.begin();  // groups are in rank order, as the indices below
    for (int d = first; d < first + replicas_; ++d) {
      const int index = d * plan.cp() + cp_coordinate;
      while (at_group != microbatch.end() && !(*at_group).holds(index)) ++at_group;
      // group_of names the rank that no group holds.
      const CpGroupView group =
          at_group != microbatch.end() ? *at_group : microbatch.group_of(index);
      packs_.push_back(pack_geometry(group.ids, batch, position, pack, group.size,
                                     index - group.first_rank, mode));
    }
  }
  int64_t at = 0;
  for (size_t d = 0; d < batch.samples_per_rank.size(); ++d) {
    first_.push_back(at);
    const int64_t count = batch.samples_per_rank[d];
    source_.insert(source_.end(), static_cast<size_t>(count), static_cast<int>(d));
    at += count;
  }
  first_.push_back(at);
}

PackedBatch empty_microbatch(const PackGeometry& g, const GlobalBatch& batch, StageFields fields,
                             const PackOptions& pack, int cp, int cp_rank, CpMode mode,
                             PackedBatch storage) {
  PackedBatch m = std::move(storage);
  m.cu_seqlens.assign(g.cu_seqlens.begin(), g.cu_seqlens.end());
  m.cu_seqlens_padded.assign(g.cu_seqlens_padded.begin(), g.cu_seqlens_padded.end());
  m.max_seqlen = g.max_seqlen;
  m.sample_ids.assign(g.sample_ids.begin(), g.sample_ids.end());
  m.cp_size = cp;
  m.cp_rank = cp_rank;
  m.cp_mode = mode;
  const auto rows = static_cast<size_t>(g.local_rows);
  m.padding_mask.resize(rows);
  if (fields.tokens) {
    m.position_ids.reserve(rows);  // appended below, not zero-filled first
    m.tokens.reserve(rows);
  }
  if (fields.labels) {
    m.labels.reserve(rows);
    m.loss_mask.reserve(rows);
  }
  // Padding mask and positions follow from the lengths alone: per segment, its real rows then its
  // padding rows, each a run (the mask is zero-filled already).
  auto* mask = m.padding_mask.data();
  auto& positions = m.position_ids;
  int64_t at = 0;
  for (const Segment& s : g.segments) {
    const bool tail = s.sample == Segment::kTailRows;
    const int64_t real = tail ? 0 : batch.real_lengths[static_cast<size_t>(s.sample)];
    const int64_t real_rows = std::clamp<int64_t>(real - s.offset, 0, s.length);
    std::fill(mask + at + real_rows, mask + at + s.length, uint8_t{1});
    if (fields.tokens) {
      const bool zero_pads = pack.pad_positions == PadPositions::kZero;
      // Grown a segment at a time, so that the zeros are still in cache when overwritten.
      const size_t first = positions.size();
      positions.resize(first + static_cast<size_t>(s.length));
      int64_t* const row = positions.data() + first;
      std::iota(row, row + (zero_pads ? real_rows : s.length), s.offset);
    }
    at += s.length;
  }
  return m;
}

void keep_stage_fields(PackedBatch& batch, StageFields fields) {
  if (!fields.tokens) {
    batch.tokens.clear();
    batch.position_ids.clear();
  }
  if (!fields.labels) {
    batch.labels.clear();
    batch.loss_mask.clear();
  }
}

Sample truncated(Sample sample, int64_t real) {
  const auto n = static_cast<size_t>(real);
  if (sample.input_ids.size() > n) {
    sample.input_ids.resize(n);
    if (!sample.loss_mask.empty()) sample.loss_mask.resize(n);
    if (!sample.labels.empty()) sample.labels.resize(n);
  }
  return sample;
}

int64_t wire_bytes(int64_t length, StageFields fields) {
  int64_t bytes = 0;
  if (fields.tokens) bytes += 8 * length;
  if (fields.labels) bytes += 8 * length + (4 * length + 7) / 8 * 8;
  return bytes;
}

void write_rows(const PackedBatch& source, int64_t from, int64_t length, StageFields fields,
                std::byte* out) {
  const RowTargets t = wire_targets(out, length, fields);
  const auto n = static_cast<size_t>(length);
  const auto f = static_cast<size_t>(from);
  if (t.tokens) std::memcpy(t.tokens, source.tokens.data() + f, n * 8);
  if (t.labels) {
    std::memcpy(t.labels, source.labels.data() + f, n * 8);
    std::memcpy(t.loss_mask, source.loss_mask.data() + f, n * 4);
  }
}

void append_tail_rows(PackedBatch& target, int64_t length, StageFields fields,
                      const PackOptions& pack) {
  const auto n = static_cast<size_t>(length);
  if (fields.tokens) target.tokens.insert(target.tokens.end(), n, pack.pad_id);
  if (fields.labels) {
    target.labels.insert(target.labels.end(), n, pack.ignore_id);
    target.loss_mask.insert(target.loss_mask.end(), n, 0.0f);
  }
}

void append_local_rows(PackedBatch& target, const Segment& s, StageFields fields,
                       const LocalSamples& local) {
  // The only rows zero-filled before they are written: this rank's own share of the pack.
  const auto at = static_cast<int64_t>(fields.tokens ? target.tokens.size() : target.labels.size());
  const auto end = static_cast<size_t>(at + s.length);
  if (fields.tokens) target.tokens.resize(end);
  if (fields.labels) {
    target.labels.resize(end);
    target.loss_mask.resize(end);
  }
  local.write(s, batch_targets(target, at, fields));
}

void append_received_rows(PackedBatch& target, const std::byte* in, int64_t length,
                          StageFields fields) {
  const auto n = static_cast<size_t>(length);
  auto append = [&in, n](auto& array) {
    using T = typename std::decay_t<decltype(array)>::value_type;
    const auto* first = reinterpret_cast<const T*>(in);
    array.insert(array.end(), first, first + n);
    in += n * sizeof(T);
  };
  if (fields.tokens) append(target.tokens);
  if (fields.labels) {
    append(target.labels);
    append(target.loss_mask);
  }
}

RowTargets wire_targets(std::byte* out, int64_t length, StageFields fields) {
  RowTargets t;
  const auto n = static_cast<size_t>(length);
  if (fields.tokens) {
    t.tokens = reinterpret_cast<int64_t*>(out);
    out += n * 8;
  }
  if (fields.labels) {
    t.labels = reinterpret_cast<int64_t*>(out);
    out += n * 8;
    t.loss_mask = reinterpret_cast<float*>(out);
    if (n % 2) std::memset(out + n * 4, 0, 4);  // keep alignment padding deterministic
  }
  return t;
}

RowTargets batch_targets(PackedBatch& batch, int64_t at, StageFields fields) {
  RowTargets t;
  const auto a = static_cast<size_t>(at);
  if (fields.tokens) t.tokens = batch.tokens.data() + a;
  if (fields.labels) {
    t.labels = batch.labels.data() + a;
    t.loss_mask = batch.loss_mask.data() + a;
  }
  return t;
}

const int64_t* LocalSamples::tokens_at(const Segment& seg) const {
  const SampleView& s = samples_[static_cast<size_t>(seg.sample - first_)];
  return s.input_ids.data() + std::min(seg.offset, static_cast<int64_t>(s.input_ids.size()));
}

void LocalSamples::write(const Segment& seg, RowTargets out) const {
  const SampleView& s = samples_[static_cast<size_t>(seg.sample - first_)];
  const int64_t real = real_lengths_[static_cast<size_t>(seg.sample)];
  const int64_t from = seg.offset;
  const int64_t end = seg.offset + seg.length;
  // Rows [from, real_end) are the sample's own, the rest padding (row indices within the sample).
  const int64_t real_end = std::clamp(real, from, end);
  const auto own = static_cast<size_t>(real_end - from);
  if (out.tokens) {
    if (own > 0) std::memcpy(out.tokens, s.input_ids.data() + from, own * sizeof(int64_t));
    std::fill(out.tokens + own, out.tokens + seg.length, pack_.pad_id);
  }
  if (!out.labels) return;
  int64_t* labels = out.labels - from;  // indexed by row within the sample
  float* mask = out.loss_mask - from;
  const int64_t last = real - 1;
  const bool shifted = s.labels_shifted && !s.labels.empty();
  if (shifted) {
    if (own > 0) std::memcpy(labels + from, s.labels.data() + from, own * sizeof(int64_t));
  } else {
    // Position j's label is the sample's token (or label) j + 1; the last real row has none.
    const int64_t* next = s.labels.empty() ? s.input_ids.data() : s.labels.data();
    const int64_t stop = std::min(real_end, last);
    if (stop > from) {
      std::memcpy(labels + from, next + from + 1,
                  static_cast<size_t>(stop - from) * sizeof(int64_t));
    }
    if (last >= from && last < end) labels[last] = pack_.ignore_id;
  }
  if (!s.loss_mask.empty()) {
    // Position j's weight is its target token's mask.
    const int64_t shift = shifted ? 0 : 1;
    const int64_t stop = std::min(real_end, real - shift);
    if (stop > from) {
      std::memcpy(mask + from, s.loss_mask.data() + from + shift,
                  static_cast<size_t>(stop - from) * sizeof(float));
    }
    if (shift && last >= from && last < end) mask[last] = 0.0f;
  } else {
    std::fill(mask + from, mask + real_end, 1.0f);
    if (!shifted && last >= from && last < end) mask[last] = 0.0f;
  }
  if (!s.labels.empty()) {
    for (int64_t j = from; j < real_end; ++j) {
      if (labels[j] == pack_.ignore_id) mask[j] = 0.0f;
    }
  }
  if (pack_.ignore_masked_labels) {
    for (int64_t j = from; j < real_end; ++j) {
      if (mask[j] == 0.0f) labels[j] = pack_.ignore_id;
    }
  }
  std::fill(labels + real_end, labels + end, pack_.ignore_id);
  std::fill(mask + real_end, mask + end, 0.0f);
}

}  // namespace thdpack::detail
