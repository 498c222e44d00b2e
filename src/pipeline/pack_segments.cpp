#include "pipeline/pack_segments.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

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
    if (it == position.end()) {
      throw InternalError("plan names sample " + std::to_string(id) + " missing from the batch");
    }
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
                           int cp, int cp_rank, CpMode mode)
    : dp_(plan.dp()) {
  std::unordered_map<int64_t, int64_t> position;
  position.reserve(batch.ids.size() * 2);
  for (size_t i = 0; i < batch.ids.size(); ++i)
    position.emplace(batch.ids[i], static_cast<int64_t>(i));
  packs_.reserve(static_cast<size_t>(plan.num_packs()));
  for (int64_t p = 0; p < plan.num_packs(); ++p) {
    packs_.push_back(pack_geometry(plan.pack_at(p), batch, position, pack, cp, cp_rank, mode));
  }
  int64_t at = 0;
  for (int d = 0; d < dp_; ++d) {
    first_.push_back(at);
    const int64_t count = batch.samples_per_rank[static_cast<size_t>(d)];
    source_.insert(source_.end(), static_cast<size_t>(count), d);
    at += count;
  }
  first_.push_back(at);
}

PackedBatch empty_microbatch(const PackGeometry& g, const GlobalBatch& batch, StageFields fields,
                             const PackOptions& pack, int cp, int cp_rank, CpMode mode) {
  PackedBatch m;
  m.cu_seqlens = g.cu_seqlens;
  m.cu_seqlens_padded = g.cu_seqlens_padded;
  m.max_seqlen = g.max_seqlen;
  m.sample_ids = g.sample_ids;
  m.cp_size = cp;
  m.cp_rank = cp_rank;
  m.cp_mode = mode;
  const auto rows = static_cast<size_t>(g.local_rows);
  m.padding_mask.resize(rows);
  if (fields.tokens) {
    m.tokens.resize(rows);
    m.position_ids.resize(rows);
  }
  if (fields.labels) {
    m.labels.resize(rows);
    m.loss_mask.resize(rows);
  }
  // Padding mask and positions follow from the lengths alone: per segment, its real rows then its
  // padding rows, each a run (the mask is zero-filled already).
  auto* mask = m.padding_mask.data();
  auto* positions = m.position_ids.data();
  int64_t at = 0;
  for (const Segment& s : g.segments) {
    const bool tail = s.sample == Segment::kTailRows;
    const int64_t real = tail ? 0 : batch.real_lengths[static_cast<size_t>(s.sample)];
    const int64_t real_rows = std::clamp<int64_t>(real - s.offset, 0, s.length);
    std::fill(mask + at + real_rows, mask + at + s.length, uint8_t{1});
    // Tail rows are not exchanged: their padding values are written here.
    if (fields.labels && tail) {
      std::fill(m.labels.begin() + at, m.labels.begin() + at + s.length, pack.ignore_id);
    }
    if (fields.tokens) {
      const bool zero_pads = pack.pad_positions == PadPositions::kZero;
      std::iota(positions + at, positions + at + (zero_pads ? real_rows : s.length), s.offset);
      if (zero_pads) std::fill(positions + at + real_rows, positions + at + s.length, int64_t{0});
      if (tail) std::fill(m.tokens.begin() + at, m.tokens.begin() + at + s.length, pack.pad_id);
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

PackedBatch sample_rows(const Sample& sample, int64_t real, const PackOptions& pack) {
  PackOptions one = pack;
  one.capacity = 0;  // truncation already applied; the capacity is the plan's concern
  one.tail_align = TailAlign::kNone;  // the tail belongs to the pack, not to one sample
  one.fixed_cu_seqlens_entries = 0;
  if (static_cast<int64_t>(sample.input_ids.size()) > real) {
    const Sample cut = truncated(sample, real);
    const SampleView view = view_of(cut);
    return pack_samples(std::span(&view, 1), one);
  }
  const SampleView view = view_of(sample);
  return pack_samples(std::span(&view, 1), one);
}

int64_t wire_bytes(int64_t length, StageFields fields) {
  int64_t bytes = 0;
  if (fields.tokens) bytes += 8 * length;
  if (fields.labels) bytes += 8 * length + (4 * length + 7) / 8 * 8;
  return bytes;
}

void write_rows(const PackedBatch& source, int64_t from, int64_t length, StageFields fields,
                std::byte* out) {
  const auto n = static_cast<size_t>(length);
  const auto f = static_cast<size_t>(from);
  if (fields.tokens) {
    std::memcpy(out, source.tokens.data() + f, n * 8);
    out += n * 8;
  }
  if (fields.labels) {
    std::memcpy(out, source.labels.data() + f, n * 8);
    out += n * 8;
    std::memcpy(out, source.loss_mask.data() + f, n * 4);
    if (n % 2) std::memset(out + n * 4, 0, 4);  // keep alignment padding deterministic
  }
}

void read_rows(const std::byte* in, int64_t length, StageFields fields, PackedBatch& target,
               int64_t at) {
  const auto n = static_cast<size_t>(length);
  const auto a = static_cast<size_t>(at);
  if (fields.tokens) {
    std::memcpy(target.tokens.data() + a, in, n * 8);
    in += n * 8;
  }
  if (fields.labels) {
    std::memcpy(target.labels.data() + a, in, n * 8);
    in += n * 8;
    std::memcpy(target.loss_mask.data() + a, in, n * 4);
  }
}

void copy_rows(const PackedBatch& source, int64_t from, int64_t length, StageFields fields,
               PackedBatch& target, int64_t at) {
  const auto b = static_cast<std::ptrdiff_t>(from);
  const auto e = static_cast<std::ptrdiff_t>(from + length);
  const auto a = static_cast<std::ptrdiff_t>(at);
  if (fields.tokens)
    std::copy(source.tokens.begin() + b, source.tokens.begin() + e, target.tokens.begin() + a);
  if (fields.labels) {
    std::copy(source.labels.begin() + b, source.labels.begin() + e, target.labels.begin() + a);
    std::copy(source.loss_mask.begin() + b, source.loss_mask.begin() + e,
              target.loss_mask.begin() + a);
  }
}

}  // namespace thdpack::detail
