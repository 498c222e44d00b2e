// In-batch packing of a language shard into one [1, T] THD row (SPEC §3, §8): trailing padding
// trimmed, labels from the input ids or from an HF `labels` field, positions restarting per
// sample, the padding divisor, sample ids, an empty shard, errors and a property test checked with
// check_pack_invariants.

#include <gtest/gtest.h>

#include "expect_throw.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/reorder.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;
using I32 = std::vector<int32_t>;
using F32 = std::vector<float>;
using U8 = std::vector<uint8_t>;

MultimodalSample text_sample(int64_t id, const I64& ids, const I64& labels = {}) {
  MultimodalSample s;
  s.id = id;
  s.fields[kInputIdsField] = SampleField::of_int64(ids);
  if (!labels.empty()) s.fields[kLabelsField] = SampleField::of_int64(labels);
  return s;
}

InBatchPackOptions options(int64_t divisor = 1, int64_t pad_id = 0, int64_t ignore_id = -100) {
  InBatchPackOptions o;
  o.divisor = divisor;
  o.pad_id = pad_id;
  o.ignore_id = ignore_id;
  return o;
}

void expect_invariants(const PackedBatch& pack, const InBatchPackOptions& o) {
  PackOptions p;
  p.divisor = o.divisor;
  p.pad_id = o.pad_id;
  p.ignore_id = o.ignore_id;
  EXPECT_NO_THROW(check_pack_invariants(pack.view(), p));
}

TEST(InBatchPacking, TrimsTrailingPaddingAndShiftsLabels) {
  const std::vector<MultimodalSample> shard = {text_sample(10, {5, 6, 7, 0, 0}),
                                               text_sample(11, {8, 9}), text_sample(12, {4, 0})};
  const InBatchPackOptions o = options();
  const PackedBatch p = pack_language_shard(shard, o);
  EXPECT_EQ(p.tokens, (I64{5, 6, 7, 8, 9, 4}));
  EXPECT_EQ(p.position_ids, (I64{0, 1, 2, 0, 1, 0}));
  EXPECT_EQ(p.labels, (I64{6, 7, -100, 9, -100, -100}));
  EXPECT_EQ(p.loss_mask, (F32{1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(p.padding_mask, (U8{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 5, 6}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 3, 5, 6}));
  EXPECT_EQ(p.max_seqlen, 3);
  EXPECT_EQ(p.sample_ids, (I64{10, 11, 12}));
  EXPECT_EQ(p.num_rows(), 6);
  expect_invariants(p, o);
}

TEST(InBatchPacking, OnlyTrailingPadIdsAreTrimmed) {
  const std::vector<MultimodalSample> shard = {text_sample(3, {5, 0, 7, 0, 0, 0})};
  const PackedBatch p = pack_language_shard(shard, options());
  EXPECT_EQ(p.tokens, (I64{5, 0, 7}));
  EXPECT_EQ(p.labels, (I64{0, 7, -100}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3}));
}

TEST(InBatchPacking, PadIdAndIgnoreIdFromTheOptions) {
  const InBatchPackOptions o = options(/*divisor=*/2, /*pad_id=*/99, /*ignore_id=*/-1);
  // 0 is an ordinary token here; 99 is padding.
  const std::vector<MultimodalSample> shard = {text_sample(1, {5, 0, 99, 99}),
                                               text_sample(2, {0, 7, 8, 99})};
  const PackedBatch p = pack_language_shard(shard, o);
  EXPECT_EQ(p.tokens, (I64{5, 0, 0, 7, 8, 99}));
  EXPECT_EQ(p.labels, (I64{0, -1, 7, 8, -1, -1}));
  EXPECT_EQ(p.padding_mask, (U8{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 2, 5}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 2, 6}));
  expect_invariants(p, o);
}

TEST(InBatchPacking, DivisorPadsEverySample) {
  const std::vector<MultimodalSample> shard = {text_sample(10, {5, 6, 7, 0, 0}),
                                               text_sample(11, {8, 9}), text_sample(12, {4, 0})};
  const InBatchPackOptions o = options(4);
  const PackedBatch p = pack_language_shard(shard, o);
  EXPECT_EQ(p.tokens, (I64{5, 6, 7, 0, 8, 9, 0, 0, 4, 0, 0, 0}));
  EXPECT_EQ(p.labels, (I64{6, 7, -100, -100, 9, -100, -100, -100, -100, -100, -100, -100}));
  EXPECT_EQ(p.loss_mask, (F32{1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(p.padding_mask, (U8{0, 0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 1}));
  // Real rows restart at 0 per sample; the core packer keeps counting on padding rows.
  EXPECT_EQ(p.position_ids, (I64{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 5, 6}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 4, 8, 12}));
  EXPECT_EQ(p.max_seqlen, 4);
  EXPECT_EQ(p.sample_ids, (I64{10, 11, 12}));
  expect_invariants(p, o);
}

TEST(InBatchPacking, HfLabelsAreUsedAndTrimmedAlike) {
  // HF labels are aligned with input_ids: position j's target is labels[j+1]. The labels of the
  // trimmed padding rows (55, 66) are dropped with them.
  const std::vector<MultimodalSample> shard = {
      text_sample(20, {5, 6, 7, 8, 0, 0}, {-100, -100, 7, 8, 55, 66})};
  const InBatchPackOptions o = options();
  const PackedBatch p = pack_language_shard(shard, o);
  EXPECT_EQ(p.tokens, (I64{5, 6, 7, 8}));
  EXPECT_EQ(p.labels, (I64{-100, 7, 8, -100}));  // from the ids it would be {6, 7, 8, -100}
  EXPECT_EQ(p.loss_mask, (F32{0, 1, 1, 0}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 4}));
  expect_invariants(p, o);
}

TEST(InBatchPacking, LabelsFieldDiffersFromTheIds) {
  // Labels that are not the ids: the pack follows the labels.
  const std::vector<MultimodalSample> shard = {text_sample(1, {5, 6, 7, 0}, {1, 2, 3, 4}),
                                               text_sample(2, {8, 9, 10})};
  const InBatchPackOptions o = options(2);
  const PackedBatch p = pack_language_shard(shard, o);
  EXPECT_EQ(p.tokens, (I64{5, 6, 7, 0, 8, 9, 10, 0}));
  EXPECT_EQ(p.labels, (I64{2, 3, -100, -100, 9, 10, -100, -100}));
  EXPECT_EQ(p.loss_mask, (F32{1, 1, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 6}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 4, 8}));
  expect_invariants(p, o);
}

TEST(InBatchPacking, VisionFieldsDoNotChangeTheTokens) {
  MultimodalSample s = text_sample(7, {1, 900, 900, 2, 0});
  SampleField grid = SampleField::of_int64(I64{1, 2, 4});
  grid.shape = {1, 3};
  s.fields[kImageGridField] = grid;
  s.fields[kPixelValuesField] = SampleField::of_float32(F32(8 * 2, 0.5f), {8, 2});
  const PackedBatch p = pack_language_shard(std::vector<MultimodalSample>{s}, options());
  EXPECT_EQ(p.tokens, (I64{1, 900, 900, 2}));
  EXPECT_EQ(p.labels, (I64{900, 900, 2, -100}));
  EXPECT_EQ(p.sample_ids, (I64{7}));
}

TEST(InBatchPacking, SampleIdsInShardOrder) {
  const std::vector<MultimodalSample> shard = {text_sample(42, {1}), text_sample(7, {2, 3}),
                                               text_sample(19, {4, 5, 6})};
  const PackedBatch p = pack_language_shard(shard, options());
  EXPECT_EQ(p.sample_ids, (I64{42, 7, 19}));
  EXPECT_EQ(p.tokens, (I64{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(p.position_ids, (I64{0, 0, 1, 0, 1, 2}));
}

TEST(InBatchPacking, EmptyShardGivesAnEmptyPack) {
  const InBatchPackOptions o = options(4);
  const PackedBatch p = pack_language_shard(std::span<const MultimodalSample>{}, o);
  EXPECT_EQ(p.num_rows(), 0);
  EXPECT_TRUE(p.tokens.empty());
  EXPECT_TRUE(p.labels.empty());
  EXPECT_TRUE(p.loss_mask.empty());
  EXPECT_TRUE(p.position_ids.empty());
  EXPECT_TRUE(p.sample_ids.empty());
  EXPECT_EQ(p.cu_seqlens, (I32{0}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0}));
  EXPECT_EQ(p.max_seqlen, 0);
  expect_invariants(p, o);
}

TEST(InBatchPacking, Errors) {
  // All padding: nothing left to pack (the core packer rejects empty samples).
  EXPECT_THROW(
      pack_language_shard(std::vector<MultimodalSample>{text_sample(3, {0, 0})}, options()),
      InvalidArgument);
  // Labels of another length than the ids.
  EXPECT_THROW(pack_language_shard(std::vector<MultimodalSample>{text_sample(4, {1, 2, 3}, {1, 2})},
                                   options()),
               InvalidArgument);
  // No input_ids.
  MultimodalSample none;
  none.id = 5;
  none.fields[kLabelsField] = SampleField::of_int64(I64{1, 2});
  EXPECT_THROW(pack_language_shard(std::vector<MultimodalSample>{none}, options()),
               InvalidArgument);
}

TEST(InBatchPacking, RandomShardsKeepEveryInvariant) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t divisor = std::vector<int64_t>{1, 2, 4, 8, 3}[rng() % 5];
    const InBatchPackOptions o = options(divisor);
    const auto n = static_cast<size_t>(rng() % 7);
    std::vector<MultimodalSample> shard;
    std::vector<I64> expected_ids;
    std::vector<I64> expected_labels;  // the trimmed labels field, empty when none
    for (size_t i = 0; i < n; ++i) {
      const auto real = static_cast<size_t>(1 + rng() % 20);
      const auto pads = static_cast<size_t>(rng() % 6);
      I64 ids(real);
      for (auto& t : ids) t = static_cast<int64_t>(rng() % 5);  // interior zeros too
      ids.back() = 1 + static_cast<int64_t>(rng() % 50);        // last real token is not padding
      expected_ids.push_back(ids);
      ids.resize(real + pads, 0);
      I64 labels;
      if (rng() % 2 == 0) {
        for (size_t j = 0; j < ids.size(); ++j) {
          labels.push_back(rng() % 3 == 0 ? -100 : static_cast<int64_t>(rng() % 1000));
        }
        expected_labels.emplace_back(labels.begin(), labels.begin() + static_cast<long>(real));
      } else {
        expected_labels.emplace_back();
      }
      shard.push_back(
          text_sample(static_cast<int64_t>(1000 + 7 * i + rng() % 7), ids, labels));  // unique ids
    }
    const PackedBatch p = pack_language_shard(shard, o);
    expect_invariants(p, o);
    ASSERT_EQ(p.sample_ids.size(), n);
    ASSERT_EQ(p.cu_seqlens.size(), n + 1);
    int64_t max_padded = 0;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(p.sample_ids[i], shard[i].id);
      const int64_t start = p.cu_seqlens_padded[i];
      const int64_t end = p.cu_seqlens_padded[i + 1];
      const auto real = static_cast<int64_t>(expected_ids[i].size());
      ASSERT_EQ(p.cu_seqlens[i + 1] - p.cu_seqlens[i], real);
      ASSERT_EQ(end - start, round_up(real, divisor));
      max_padded = std::max(max_padded, end - start);
      for (int64_t j = 0; j < end - start; ++j) {
        const auto row = static_cast<size_t>(start + j);
        if (j < real) {
          EXPECT_EQ(p.tokens[row], expected_ids[i][static_cast<size_t>(j)]);
          EXPECT_EQ(p.position_ids[row], j);
          EXPECT_EQ(p.padding_mask[row], 0);
          int64_t label = -100;
          if (j + 1 < real) {
            label = expected_labels[i].empty() ? expected_ids[i][static_cast<size_t>(j + 1)]
                                               : expected_labels[i][static_cast<size_t>(j + 1)];
          }
          EXPECT_EQ(p.labels[row], label) << "sample " << i << " row " << j;
          EXPECT_EQ(p.loss_mask[row], label == -100 ? 0.0f : 1.0f);
        } else {
          EXPECT_EQ(p.tokens[row], 0);
          EXPECT_EQ(p.labels[row], -100);
          EXPECT_EQ(p.loss_mask[row], 0.0f);
          EXPECT_EQ(p.padding_mask[row], 1);
        }
      }
    }
    EXPECT_EQ(p.max_seqlen, max_padded);
  }
}

}  // namespace
}  // namespace thdpack
