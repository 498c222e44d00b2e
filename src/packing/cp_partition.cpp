#include "thdpack/packing/cp_partition.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"

namespace thdpack {
namespace {

template <typename T>
void gather_rows(std::span<const T> from, const std::vector<RowRange>& rows, std::vector<T>& to) {
  size_t at = to.size();
  size_t total = at;
  for (const auto& r : rows) total += static_cast<size_t>(r.length);
  to.resize(total);
  for (const auto& r : rows) {
    std::memcpy(to.data() + at, from.data() + r.begin, static_cast<size_t>(r.length) * sizeof(T));
    at += static_cast<size_t>(r.length);
  }
}

template <typename T>
void scatter_rows(std::span<const T> from, const std::vector<RowRange>& rows, std::vector<T>& to) {
  size_t at = 0;
  for (const auto& r : rows) {
    std::memcpy(to.data() + r.begin, from.data() + at, static_cast<size_t>(r.length) * sizeof(T));
    at += static_cast<size_t>(r.length);
  }
}

void copy_metadata(const PackedBatchView& from, PackedBatch& to) {
  to.cu_seqlens.assign(from.cu_seqlens.begin(), from.cu_seqlens.end());
  to.cu_seqlens_padded.assign(from.cu_seqlens_padded.begin(), from.cu_seqlens_padded.end());
  to.max_seqlen = from.max_seqlen;
  to.sample_ids.assign(from.sample_ids.begin(), from.sample_ids.end());
}

// Per-row fields must all have num_rows() entries; copying rows trusts that.
void check_row_fields(const PackedBatchView& p, const std::string& who) {
  const auto rows = p.tokens.size();
  if (p.labels.size() != rows || p.loss_mask.size() != rows || p.position_ids.size() != rows ||
      p.padding_mask.size() != rows) {
    fail(who, ": per-row fields differ in length (tokens ", rows, ", labels ", p.labels.size(),
         ", loss_mask ", p.loss_mask.size(), ", position_ids ", p.position_ids.size(),
         ", padding_mask ", p.padding_mask.size(), ")");
  }
}

bool same_metadata(const PackedBatchView& a, const PackedBatchView& b) {
  return std::ranges::equal(a.cu_seqlens, b.cu_seqlens) &&
         std::ranges::equal(a.cu_seqlens_padded, b.cu_seqlens_padded) &&
         a.max_seqlen == b.max_seqlen && std::ranges::equal(a.sample_ids, b.sample_ids) &&
         a.cp_size == b.cp_size && a.cp_mode == b.cp_mode;
}

// Calls f(source span, destination vector) for each per-row field of a pack.
template <typename F>
void for_each_row_field(const PackedBatchView& from, PackedBatch& to, F&& f) {
  f(from.tokens, to.tokens);
  f(from.labels, to.labels);
  f(from.loss_mask, to.loss_mask);
  f(from.position_ids, to.position_ids);
  f(from.padding_mask, to.padding_mask);
}

// The digest of every per-row field of a whole pack.
uint64_t digest_of(const PackedBatchView& whole) {
  Hash64 h;
  h.add_all(whole.tokens)
      .add_all(whole.labels)
      .add_all(whole.loss_mask)
      .add_all(whole.position_ids)
      .add_all(whole.padding_mask);
  return h.digest() | 1;  // never 0, which means "not known"
}

// Σ_{p=a}^{b-1} (p+1)
double arithmetic_work(int64_t a, int64_t b) {
  if (b <= a) return 0.0;
  return (static_cast<double>(a + 1) + static_cast<double>(b)) * static_cast<double>(b - a) / 2.0;
}

}  // namespace

PackedBatch cp_slice(const PackedBatchView& whole, int cp, int rank, CpMode mode) {
  check(whole.cp_size == 1, "cp_slice needs a whole pack; this one is already CP rank ",
        whole.cp_rank, " of ", whole.cp_size);
  check_row_fields(whole, "cp_slice");
  const ThdLayout layout = whole.layout();
  check(layout.total_rows() == whole.num_rows(), "cp_slice: cu_seqlens_padded ends at ",
        layout.total_rows(), " but the pack has ", whole.num_rows(), " rows");
  const auto rows = layout.cp_rows(cp, rank, mode);
  PackedBatch out;
  for_each_row_field(whole, out, [&](auto from, auto& to) { gather_rows(from, rows, to); });
  copy_metadata(whole, out);
  out.cp_size = cp;
  out.cp_rank = rank;
  out.cp_mode = mode;
  out.source_digest = digest_of(whole);
  return out;
}

PackedBatch cp_unslice(std::span<const PackedBatchView> slices) {
  if (slices.empty()) throw InvalidArgument("cp_unslice needs at least one slice");
  const PackedBatchView& first = slices[0];
  const int cp = first.cp_size;
  check(static_cast<int>(slices.size()) == cp, "cp_unslice got ", slices.size(),
        " slices for cp=", cp);
  const ThdLayout layout = first.layout();
  const auto total = static_cast<size_t>(layout.total_rows());
  PackedBatch out;
  for_each_row_field(first, out, [total](auto, auto& to) { to.resize(total); });
  for (int r = 0; r < cp; ++r) {
    const PackedBatchView& s = slices[static_cast<size_t>(r)];
    if (s.cp_rank != r || !same_metadata(s, first)) {
      fail("cp_unslice: slice ", r, " is not CP rank ", r, " of the same pack");
    }
    if (s.source_digest != 0 && first.source_digest != 0 &&
        s.source_digest != first.source_digest) {
      fail("cp_unslice: slice ", r,
           " was cut from a different pack than slice 0 (same metadata, other contents)");
    }
    check_row_fields(s, message("cp_unslice: slice ", r));
    const auto rows = layout.cp_rows(cp, r, first.cp_mode);
    int64_t expected = 0;
    for (const auto& range : rows) expected += range.length;
    check(s.num_rows() == expected, "cp_unslice: slice ", r, " has ", s.num_rows(),
          " rows, expected ", expected);
    for_each_row_field(s, out, [&](auto from, auto& to) { scatter_rows(from, rows, to); });
  }
  copy_metadata(first, out);
  return out;
}

std::vector<int64_t> cp_global_rows(const ThdLayout& layout, int cp, int rank, CpMode mode) {
  std::vector<int64_t> out;
  for (const auto& r : layout.cp_rows(cp, rank, mode)) {
    for (int64_t j = 0; j < r.length; ++j) out.push_back(r.begin + j);
  }
  return out;
}

double causal_attention_work(const ThdLayout& layout, std::span<const RowRange> rows) {
  double work = 0;
  const int64_t n = layout.num_sequences();
  for (const auto& range : rows) {
    int64_t row = range.begin;
    const int64_t end = range.begin + range.length;
    // First sequence whose padded end is past `row`.
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (layout.padded_offset(mid) + layout.padded_length(mid) <= row) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    for (int64_t i = lo; i < n && row < end; ++i) {
      const int64_t seq_begin = layout.padded_offset(i);
      const int64_t seq_end = seq_begin + layout.padded_length(i);
      const int64_t a = row - seq_begin;
      const int64_t b = std::min(end, seq_end) - seq_begin;
      work += arithmetic_work(a, std::min(b, layout.real_length(i)));
      row = std::min(end, seq_end);
    }
  }
  return work;
}

std::vector<double> cp_attention_work(const ThdLayout& layout, int cp, CpMode mode) {
  std::vector<double> work;
  for (int r = 0; r < cp; ++r) {
    const auto rows = layout.cp_rows(cp, r, mode);
    work.push_back(causal_attention_work(layout, rows));
  }
  return work;
}

}  // namespace thdpack
