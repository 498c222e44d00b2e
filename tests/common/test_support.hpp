#pragma once
// Helpers shared by the unit tests.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "expect_throw.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::testing {

/// Ids 0..n-1 with the given lengths, split equally over dp ranks.
struct OwnedInput {
  std::vector<int64_t> ids;
  std::vector<int64_t> lengths;
  std::vector<int64_t> samples_per_rank;
  std::vector<int64_t> group_ids;

  ScheduleInput view() const { return {ids, lengths, samples_per_rank, group_ids}; }
};

inline OwnedInput make_input(std::vector<int64_t> lengths, int dp) {
  OwnedInput in;
  in.lengths = std::move(lengths);
  for (size_t i = 0; i < in.lengths.size(); ++i) in.ids.push_back(static_cast<int64_t>(i));
  in.samples_per_rank.assign(static_cast<size_t>(dp), static_cast<int64_t>(in.lengths.size()) / dp);
  return in;
}

/// Lengths that stress int64 sums at a capacity near INT64_MAX: about the capacity, half of it, a
/// third of it, or a few tokens, in random order.
inline std::vector<int64_t> near_capacity_lengths(std::mt19937_64& rng, int64_t capacity,
                                                  size_t n) {
  std::vector<int64_t> lengths(n);
  for (auto& len : lengths) {
    switch (rng() % 4) {
      case 0: len = capacity - static_cast<int64_t>(rng() % 4); break;
      case 1: len = capacity / 2 + static_cast<int64_t>(rng() % 3) - 1; break;
      case 2: len = capacity / 3; break;
      default: len = 1 + static_cast<int64_t>(rng() % 8);
    }
  }
  return lengths;
}

/// Lognormal-ish random lengths in [lo, hi].
inline std::vector<int64_t> random_lengths(std::mt19937_64& rng, size_t n, int64_t lo, int64_t hi) {
  std::lognormal_distribution<double> dist(std::log(static_cast<double>(lo + hi) / 4), 1.0);
  std::vector<int64_t> out(n);
  for (auto& v : out) {
    v = std::clamp<int64_t>(static_cast<int64_t>(dist(rng)), lo, hi);
  }
  return out;
}

/// Every field of two packed batches is equal.
inline void expect_same_pack(const PackedBatch& a, const PackedBatch& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.loss_mask, b.loss_mask);
  EXPECT_EQ(a.position_ids, b.position_ids);
  EXPECT_EQ(a.padding_mask, b.padding_mask);
  EXPECT_EQ(a.cu_seqlens, b.cu_seqlens);
  EXPECT_EQ(a.cu_seqlens_padded, b.cu_seqlens_padded);
  EXPECT_EQ(a.max_seqlen, b.max_seqlen);
  EXPECT_EQ(a.sample_ids, b.sample_ids);
  EXPECT_EQ(a.cp_size, b.cp_size);
  EXPECT_EQ(a.cp_rank, b.cp_rank);
}

}  // namespace thdpack::testing
