#include "thdpack/pipeline/step_verification.hpp"

#include <sstream>
#include <string>

#include "pipeline/pack_segments.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"

namespace thdpack {
namespace {

// What every rank reports about its step.
struct Digest {
  int64_t dp = 0;
  int64_t microbatches = 0;
  uint64_t metadata = 0;
  uint64_t sums = 0;
  int64_t failed = 0;       // the reference comparison failed here
  int64_t source_rows = 0;  // real tokens the designated readers started with
  uint64_t source_sum = 0;
  int64_t held_rows = 0;  // real tokens held by first-stage TP-rank-0 ranks
  uint64_t held_sum = 0;
};

// Token checksum weighted by position in the sample, so moves within a sample show.
uint64_t token_term(int64_t token, int64_t position) {
  return static_cast<uint64_t>(token) * (static_cast<uint64_t>(position) * 2 + 1);
}

template <typename T>
std::string compare_field(const char* name, const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return message(name, " has ", got.size(), " rows, expected ", want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == want[i])) {
      std::ostringstream out;
      out << name << "[" << i << "] is " << +got[i] << ", expected " << +want[i];
      return out.str();
    }
  }
  return "";
}

std::string compare(const PackedBatch& got, const PackedBatch& want) {
  for (const std::string& diff :
       {compare_field("tokens", got.tokens, want.tokens),
        compare_field("labels", got.labels, want.labels),
        compare_field("loss_mask", got.loss_mask, want.loss_mask),
        compare_field("position_ids", got.position_ids, want.position_ids),
        compare_field("padding_mask", got.padding_mask, want.padding_mask),
        compare_field("cu_seqlens", got.cu_seqlens, want.cu_seqlens),
        compare_field("cu_seqlens_padded", got.cu_seqlens_padded, want.cu_seqlens_padded),
        compare_field("sample_ids", got.sample_ids, want.sample_ids)}) {
    if (!diff.empty()) return diff;
  }
  if (got.max_seqlen != want.max_seqlen) return "max_seqlen differs";
  if (got.cp_size != want.cp_size || got.cp_rank != want.cp_rank) return "CP coordinates differ";
  return "";
}

// This rank's micro-batches against the single-process reference: "" when equal, else where
// they first differ.
std::string difference_from_reference(int rank, const PipelineOptions& options,
                                      const StepResult& result,
                                      const std::function<Sample(int64_t)>& sample_of) {
  const auto& mine = *result.microbatches;
  const auto want = reference_microbatches(result.batch, result.plan, sample_of, options, rank);
  if (want.size() != mine.size()) {
    return message(mine.size(), " micro-batches, reference has ", want.size());
  }
  for (size_t k = 0; k < mine.size(); ++k) {
    const std::string diff = compare(mine[k], want[k]);
    if (!diff.empty()) return message("micro-batch ", k, ": ", diff);
  }
  return "";
}

// The token counts and sums of `d`: what this rank read (the first reader of its DP index) and
// what its micro-batches hold (the first stage's TP rank 0), so that the world can check that
// every token arrived once.
void add_token_terms(Digest& d, const Topology& t, const Coordinates& me, const StepResult& result,
                     std::span<const Sample> local_samples) {
  if (me.tp == 0 && me.cp == 0 && me.pp == 0) {
    const int64_t first = [&] {
      int64_t at = 0;
      for (int r = 0; r < me.dp; ++r) at += result.batch.samples_per_rank[static_cast<size_t>(r)];
      return at;
    }();
    for (size_t i = 0; i < local_samples.size(); ++i) {
      const Sample s = detail::truncated(local_samples[i],
                                         result.batch.real_lengths[static_cast<size_t>(first) + i]);
      d.source_rows += static_cast<int64_t>(s.input_ids.size());
      for (size_t j = 0; j < s.input_ids.size(); ++j)
        d.source_sum += token_term(s.input_ids[j], static_cast<int64_t>(j));
    }
  }
  if (me.tp == 0 && stage_fields(t, me.pp).tokens) {
    for (const PackedBatch& m : *result.microbatches) {
      for (size_t j = 0; j < m.tokens.size(); ++j) {
        if (m.padding_mask[j]) continue;
        ++d.held_rows;
        d.held_sum += token_term(m.tokens[j], m.position_ids[j]);
      }
    }
  }
}

// The world's verdict on the digests of every rank: "" when counts, sums and metadata agree and
// every token is conserved.
std::string verdict_of(const std::vector<Digest>& all) {
  std::string verdict;
  Digest total;
  for (int r = 0; r < static_cast<int>(all.size()) && verdict.empty(); ++r) {
    const Digest& x = all[static_cast<size_t>(r)];
    total.source_rows += x.source_rows;
    total.source_sum += x.source_sum;
    total.held_rows += x.held_rows;
    total.held_sum += x.held_sum;
    if (x.microbatches != all[0].microbatches)
      verdict = message("rank ", r, " has a different micro-batch count");
    if (x.sums != all[0].sums) verdict = message("rank ", r, " has different step length sums");
    for (int q = 0; q < r && verdict.empty(); ++q) {
      if (all[static_cast<size_t>(q)].dp == x.dp &&
          all[static_cast<size_t>(q)].metadata != x.metadata) {
        verdict =
            message("ranks ", q, " and ", r, " (DP index ", x.dp, ") hold different metadata");
      }
    }
  }
  if (verdict.empty() &&
      (total.source_rows != total.held_rows || total.source_sum != total.held_sum)) {
    verdict =
        message("tokens not conserved: readers started with ", total.source_rows,
                " real tokens, the first stage holds ", total.held_rows,
                total.source_rows == total.held_rows ? " (same count, different content)" : "");
  }
  return verdict;
}

}  // namespace

void verify_step(Communicator& world, const PipelineOptions& options, const StepResult& result,
                 std::span<const Sample> local_samples,
                 const std::function<Sample(int64_t)>& sample_of) {
  const Topology& t = options.topology;
  const Coordinates me = t.coordinates(world.rank());
  const auto& mine = *result.microbatches;

  const std::string failure = difference_from_reference(world.rank(), options, result, sample_of);

  Digest d;
  // Ranks that must hold the same metadata: one DP index with fixed CP; one dp×cp index with
  // dynamic CP (its groups change between micro-batches).
  d.dp = result.dynamic_cp ? me.dp * t.cp() + me.cp : me.dp;
  d.microbatches = static_cast<int64_t>(mine.size());
  d.failed = failure.empty() ? 0 : 1;
  Hash64 metadata;
  for (const PackedBatch& m : mine) {
    metadata.add_all(std::span<const int32_t>(m.cu_seqlens));
    metadata.add_all(std::span<const int32_t>(m.cu_seqlens_padded));
    metadata.add(static_cast<uint64_t>(m.max_seqlen));
    metadata.add_all(std::span<const int64_t>(m.sample_ids));
  }
  d.metadata = metadata.digest();
  Hash64 sums;
  for (double v :
       {result.sums.s1_real, result.sums.s2_real, result.sums.s1_padded, result.sums.s2_padded}) {
    sums.add(v);
  }
  d.sums = sums.digest();
  add_token_terms(d, t, me, result, local_samples);

  const std::vector<Digest> all = allgather_value(world, d);
  std::string verdict = verdict_of(all);
  bool any_failed = false;
  for (const Digest& x : all) any_failed = any_failed || x.failed;
  if (any_failed) {
    // Everyone learns every failing rank's reason.
    const std::string line =
        failure.empty() ? "" : message("rank ", world.rank(), ": ", failure, "\n");
    const std::vector<char> text(line.begin(), line.end());
    const std::vector<char> lines = allgather_vector<char>(world, text);
    const std::string joined(lines.begin(), lines.end());
    verdict = "distributed result differs from the single-process reference: " +
              joined.substr(0, joined.find('\n'));
  }
  if (!verdict.empty()) throw InternalError("step verification failed: " + verdict);
}

}  // namespace thdpack
