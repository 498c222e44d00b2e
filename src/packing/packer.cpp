#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/oversize_fix.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

int64_t tail_target(int64_t rows, const PackOptions& o) {
  switch (o.tail_align) {
    case TailAlign::kNone:
      return rows;
    case TailAlign::kMultiple:
      if (o.tail_multiple < 1 || o.tail_multiple % o.divisor != 0) {
        fail("tail_multiple (", o.tail_multiple,
             ") must be a positive multiple of the padding divisor ", o.divisor);
      }
      return round_up(rows, o.tail_multiple);
    case TailAlign::kCapacity:
      if (o.capacity < 1 || o.capacity % o.divisor != 0) {
        fail("aligning to capacity needs a capacity (", o.capacity,
             ") that is a positive multiple of the padding divisor ", o.divisor);
      }
      return o.capacity;
  }
  return rows;
}

// Writes the rows of one sequence: `real` real rows from `s` (if any) followed by padding up to
// `padded` rows, starting at row `at`. Padding position ids continue from `position_base + real`.
void write_sequence(PackedBatch& p, int64_t at, const SampleView* s, int64_t real, int64_t padded,
                    const PackOptions& o) {
  auto* tokens = p.tokens.data() + at;
  auto* labels = p.labels.data() + at;
  auto* mask = p.loss_mask.data() + at;
  auto* positions = p.position_ids.data() + at;
  auto* pad = p.padding_mask.data() + at;

  if (real > 0) {
    const bool shifted = s->labels_shifted && !s->labels.empty();
    std::memcpy(tokens, s->input_ids.data(), static_cast<size_t>(real) * sizeof(int64_t));
    std::iota(positions, positions + real, int64_t{0});
    std::memset(pad, 0, static_cast<size_t>(real));
    const int64_t last = real - 1;
    if (shifted) {
      std::memcpy(labels, s->labels.data(), static_cast<size_t>(real) * sizeof(int64_t));
    } else {
      const int64_t* next = s->labels.empty() ? s->input_ids.data() + 1 : s->labels.data() + 1;
      std::memcpy(labels, next, static_cast<size_t>(last) * sizeof(int64_t));
      labels[last] = o.ignore_id;
    }
    if (!s->loss_mask.empty()) {
      // Position j predicts token j+1: its weight is the target token's mask.
      const int64_t shift = shifted ? 0 : 1;
      const int64_t count = real - shift;
      std::memcpy(mask, s->loss_mask.data() + shift, static_cast<size_t>(count) * sizeof(float));
      if (shift) mask[last] = 0.0f;
    } else {
      std::fill(mask, mask + real, 1.0f);
      if (!shifted) mask[last] = 0.0f;
    }
    if (!s->labels.empty()) {
      for (int64_t j = 0; j < real; ++j) {
        if (labels[j] == o.ignore_id) mask[j] = 0.0f;
      }
    }
    if (o.ignore_masked_labels) {
      for (int64_t j = 0; j < real; ++j) {
        if (mask[j] == 0.0f) labels[j] = o.ignore_id;
      }
    }
  }
  const int64_t pads = padded - real;
  if (pads > 0) {
    std::fill(tokens + real, tokens + padded, o.pad_id);
    std::fill(labels + real, labels + padded, o.ignore_id);
    std::fill(mask + real, mask + padded, 0.0f);
    std::memset(pad + real, 1, static_cast<size_t>(pads));
    if (o.pad_positions == PadPositions::kContinue) {
      std::iota(positions + real, positions + padded, real);
    } else {
      std::fill(positions + real, positions + padded, int64_t{0});
    }
  }
}

void resize_rows(PackedBatch& p, int64_t rows) {
  const auto n = static_cast<size_t>(rows);
  p.tokens.resize(n);
  p.labels.resize(n);
  p.loss_mask.resize(n);
  p.position_ids.resize(n);
  p.padding_mask.resize(n);
}

}  // namespace

void validate_sample(const SampleView& s) {
  const auto n = s.input_ids.size();
  check(n != 0, "sample ", s.id, " has no tokens");
  if (!s.loss_mask.empty() && s.loss_mask.size() != n) {
    fail("sample ", s.id, ": loss_mask has ", s.loss_mask.size(), " entries but input_ids has ", n);
  }
  if (!s.labels.empty() && s.labels.size() != n) {
    fail("sample ", s.id, ": labels has ", s.labels.size(), " entries but input_ids has ", n);
  }
}

int64_t padding_divisor(const PaddingSpec& spec) {
  if (spec.cp < 1 || spec.tp < 1 || spec.dp < 1) {
    throw InvalidArgument("padding divisor: cp, tp and dp must be >= 1");
  }
  int64_t d = 1;
  if (spec.dynamic_cp) {
    if (spec.min_cp < 1) throw InvalidArgument("padding divisor: min_cp must be >= 1");
    const int64_t ranks = checked_mul(spec.dp, spec.cp, "padding divisor dp x cp");
    // Every group size is G or divides the largest member of one of two chains of doublings
    // (powers of two, min_cp times powers of two) that stays within G.
    auto lcm = [](int64_t a, int64_t b) {
      return checked_mul(a / std::gcd(a, b), b, "padding divisor: lcm of the CP group sizes");
    };
    int64_t sizes = ranks;
    int64_t power = 1;
    while (power * 2 <= ranks) power *= 2;
    if (power >= spec.min_cp) sizes = lcm(sizes, power);
    int64_t scaled = spec.min_cp;
    while (scaled * 2 <= ranks) scaled *= 2;
    if (scaled <= ranks) sizes = lcm(sizes, scaled);
    d = checked_mul(int64_t{2}, sizes, "padding divisor 2 x lcm of the CP group sizes");
  } else if (spec.cp > 1) {
    d = 2LL * spec.cp;
  }
  if (spec.sequence_parallel) d = checked_mul(d, spec.tp, "padding divisor x tp");
  return d;
}

SampleView view_of(const Sample& s) {
  return SampleView{s.id, s.input_ids, s.loss_mask, s.labels, s.labels_shifted};
}

PackedBatchView PackedBatch::view() const {
  return PackedBatchView{tokens,       labels,     loss_mask,         position_ids,
                         padding_mask, cu_seqlens, cu_seqlens_padded, max_seqlen,
                         sample_ids,   cp_size,    cp_rank,           cp_mode,
                         source_digest};
}

int64_t aligned_pack_rows(int64_t rows, const PackOptions& o) {
  const int64_t total = tail_target(rows, o);
  if (o.capacity > 0 && total > o.capacity && rows <= o.capacity) {
    fail("tail alignment to a multiple of ", o.tail_multiple, " takes the pack from ", rows, " to ",
         total, " rows, over the capacity ", o.capacity,
         "; use a multiple that divides the capacity");
  }
  check(total >= rows, "pack of ", rows, " rows exceeds the tail alignment target ", total);
  check(total <= std::numeric_limits<int32_t>::max(), "pack of ", total,
        " rows overflows int32 cu_seqlens; use smaller packs");
  return total;
}

void fix_cu_seqlens_entries(std::vector<int32_t>& cu_seqlens,
                            std::vector<int32_t>& cu_seqlens_padded, const PackOptions& o) {
  if (o.fixed_cu_seqlens_entries <= 0) return;
  const auto want = static_cast<size_t>(o.fixed_cu_seqlens_entries);
  check(cu_seqlens.size() <= want, "pack has ", cu_seqlens.size() - 1,
        " sequences but fixed_cu_seqlens_entries=", want, " allows at most ", want - 1);
  cu_seqlens.resize(want, cu_seqlens.back());
  cu_seqlens_padded.resize(want, cu_seqlens_padded.back());
}

namespace {

// A sample id names one sample: a pack holding one twice would deliver, and report, the wrong one.
void check_unique_ids(std::span<const SampleView> samples) {
  std::vector<int64_t> ids;
  ids.reserve(samples.size());
  for (const auto& s : samples) ids.push_back(s.id);
  std::sort(ids.begin(), ids.end());
  const auto twice = std::adjacent_find(ids.begin(), ids.end());
  check(twice == ids.end(), "sample id ", twice == ids.end() ? 0 : *twice,
        " appears twice in one pack; ids must be unique");
}

}  // namespace

PackedBatch pack_samples(std::span<const SampleView> samples, const PackOptions& o) {
  if (o.divisor < 1) throw InvalidArgument("padding divisor must be >= 1");
  check(o.capacity >= 0, "pack capacity must be >= 0 (0: unchecked), got ", o.capacity);
  check_unique_ids(samples);
  int64_t rows = 0;
  int64_t longest = 0;
  for (const auto& s : samples) {
    validate_sample(s);
    const auto len = static_cast<int64_t>(s.input_ids.size());
    rows += round_up(len, o.divisor);
    longest = std::max(longest, len);
  }
  if (o.capacity > 0 && rows > o.capacity) {
    if (samples.size() == 1) {
      fail("sample ", samples[0].id, " has ", longest, " tokens (", rows,
           " padded) but the pack capacity max_seqlen_per_dp_cp_rank x cp is ", o.capacity, "; ",
           kOversizeFix);
    }
    fail("samples of ", rows, " padded tokens do not fit one pack of capacity ", o.capacity);
  }
  const int64_t total = aligned_pack_rows(rows, o);

  PackedBatch p;
  resize_rows(p, total);
  p.cu_seqlens.reserve(samples.size() + 2);
  p.cu_seqlens_padded.reserve(samples.size() + 2);
  p.cu_seqlens.push_back(0);
  p.cu_seqlens_padded.push_back(0);
  p.sample_ids.reserve(samples.size());
  int64_t at = 0;
  int64_t real_total = 0;
  for (const auto& s : samples) {
    const auto real = static_cast<int64_t>(s.input_ids.size());
    const int64_t padded = round_up(real, o.divisor);
    write_sequence(p, at, &s, real, padded, o);
    at += padded;
    real_total += real;
    p.cu_seqlens.push_back(static_cast<int32_t>(real_total));
    p.cu_seqlens_padded.push_back(static_cast<int32_t>(at));
    p.sample_ids.push_back(s.id);
    p.max_seqlen = std::max(p.max_seqlen, padded);
  }

  const int64_t tail = total - rows;
  if (tail > 0) {
    if (o.tail_policy == TailPolicy::kExtendLast && !samples.empty()) {
      const SampleView& last = samples.back();
      const auto real = static_cast<int64_t>(last.input_ids.size());
      const int64_t start = p.cu_seqlens_padded[p.cu_seqlens_padded.size() - 2];
      write_sequence(p, start, &last, real, total - start, o);
      p.cu_seqlens_padded.back() = static_cast<int32_t>(total);
      p.max_seqlen = std::max(p.max_seqlen, total - start);
    } else {
      write_sequence(p, at, nullptr, 0, tail, o);
      p.cu_seqlens.push_back(static_cast<int32_t>(real_total));
      p.cu_seqlens_padded.push_back(static_cast<int32_t>(total));
      p.max_seqlen = std::max(p.max_seqlen, tail);
    }
  }

  fix_cu_seqlens_entries(p.cu_seqlens, p.cu_seqlens_padded, o);
  return p;
}

}  // namespace thdpack
