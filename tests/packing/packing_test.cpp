// THD packing (SPEC §3): padding divisor, every field of pack_samples on hand-made samples, label
// and loss-mask conventions, tail padding, errors, a property test over thousands of random packs
// and checks that check_pack_invariants notices corruption.

#include <gtest/gtest.h>

#include "expect_throw.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/packing/thd_layout.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;
using I32 = std::vector<int32_t>;
using F32 = std::vector<float>;
using U8 = std::vector<uint8_t>;

// Expects `body` to throw E with a message containing every needle.
Sample make_sample(int64_t id, I64 tokens, F32 loss_mask = {}, I64 labels = {},
                   bool shifted = false) {
  Sample s;
  s.id = id;
  s.input_ids = std::move(tokens);
  s.loss_mask = std::move(loss_mask);
  s.labels = std::move(labels);
  s.labels_shifted = shifted;
  return s;
}

std::vector<SampleView> views_of(const std::vector<Sample>& samples) {
  std::vector<SampleView> out;
  for (const auto& s : samples) out.push_back(view_of(s));
  return out;
}

PackedBatch pack(const std::vector<Sample>& samples, const PackOptions& options) {
  const auto views = views_of(samples);
  return pack_samples(views, options);
}

template <typename T>
std::vector<T> to_vec(std::span<const T> s) {
  return std::vector<T>(s.begin(), s.end());
}

// ---------------------------------------------------------------------------------------------
// Padding divisor

TEST(PaddingDivisor, CpAlone) {
  EXPECT_EQ(padding_divisor({.cp = 1}), 1);
  EXPECT_EQ(padding_divisor({.cp = 2}), 4);
  EXPECT_EQ(padding_divisor({.cp = 4}), 8);
  EXPECT_EQ(padding_divisor({.cp = 8}), 16);
  EXPECT_EQ(padding_divisor({.cp = 3}), 6);
}

TEST(PaddingDivisor, TimesTpOnlyWithSequenceParallel) {
  EXPECT_EQ(padding_divisor({.cp = 1, .tp = 4, .sequence_parallel = false}), 1);
  EXPECT_EQ(padding_divisor({.cp = 1, .tp = 4, .sequence_parallel = true}), 4);
  EXPECT_EQ(padding_divisor({.cp = 2, .tp = 4, .sequence_parallel = false}), 4);
  EXPECT_EQ(padding_divisor({.cp = 2, .tp = 4, .sequence_parallel = true}), 16);
  EXPECT_EQ(padding_divisor({.cp = 4, .tp = 2, .sequence_parallel = true}), 16);
}

TEST(PaddingDivisor, DynamicCpUsesTwoDpCp) {
  EXPECT_EQ(padding_divisor({.cp = 2, .dynamic_cp = true, .dp = 4}), 16);
  EXPECT_EQ(padding_divisor({.cp = 1, .dynamic_cp = true, .dp = 8}), 16);
  EXPECT_EQ(
      padding_divisor({.cp = 4, .tp = 2, .sequence_parallel = true, .dynamic_cp = true, .dp = 2}),
      32);
  // dp is only read with dynamic CP.
  EXPECT_EQ(padding_divisor({.cp = 2, .dynamic_cp = false, .dp = 8}), 4);
}

TEST(PaddingDivisor, RejectsSizesBelowOne) {
  EXPECT_THROW(padding_divisor({.cp = 0}), InvalidArgument);
  EXPECT_THROW(padding_divisor({.cp = 1, .tp = 0}), InvalidArgument);
  EXPECT_THROW(padding_divisor({.cp = 1, .dynamic_cp = true, .dp = 0}), InvalidArgument);
  EXPECT_THROW(padding_divisor({.cp = 1, .dynamic_cp = true, .dp = 2, .min_cp = 0}),
               InvalidArgument);

  EXPECT_THROW(padding_divisor({.cp = -2}), InvalidArgument);
}

TEST(PaddingDivisor, RoundUp) {
  EXPECT_EQ(round_up(1, 4), 4);
  EXPECT_EQ(round_up(4, 4), 4);
  EXPECT_EQ(round_up(5, 4), 8);
  EXPECT_EQ(round_up(7, 1), 7);
  EXPECT_EQ(round_up(0, 8), 0);
}

// ---------------------------------------------------------------------------------------------
// Fields of a pack, checked exactly

TEST(PackSamples, EveryFieldOfTwoSamples) {
  const std::vector<Sample> samples = {make_sample(7, {11, 12, 13}),
                                       make_sample(9, {21, 22, 23, 24, 25})};
  PackOptions o;
  o.divisor = 4;
  const PackedBatch p = pack(samples, o);
  // Sample 7: 3 real rows + 1 pad; sample 9: 5 real rows + 3 pads.
  EXPECT_EQ(p.tokens, (I64{11, 12, 13, 0, 21, 22, 23, 24, 25, 0, 0, 0}));
  EXPECT_EQ(p.labels, (I64{12, 13, -100, -100, 22, 23, 24, 25, -100, -100, -100, -100}));
  EXPECT_EQ(p.loss_mask, (F32{1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(p.position_ids, (I64{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(p.padding_mask, (U8{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 8}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 4, 12}));
  EXPECT_EQ(p.max_seqlen, 8);
  EXPECT_EQ(p.sample_ids, (I64{7, 9}));
  EXPECT_EQ(p.cp_size, 1);
  EXPECT_EQ(p.cp_rank, 0);
  EXPECT_EQ(p.num_rows(), 12);
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));

  // The view exposes the same data.
  const PackedBatchView v = p.view();
  EXPECT_EQ(to_vec(v.tokens), p.tokens);
  EXPECT_EQ(to_vec(v.cu_seqlens_padded), p.cu_seqlens_padded);
  EXPECT_EQ(v.max_seqlen, 8);
  EXPECT_EQ(to_vec(v.sample_ids), p.sample_ids);
}

TEST(PackSamples, PadPositionsZero) {
  const std::vector<Sample> samples = {make_sample(7, {11, 12, 13}),
                                       make_sample(9, {21, 22, 23, 24, 25})};
  PackOptions o;
  o.divisor = 4;
  o.pad_positions = PadPositions::kZero;
  const PackedBatch p = pack(samples, o);
  EXPECT_EQ(p.position_ids, (I64{0, 1, 2, 0, 0, 1, 2, 3, 4, 0, 0, 0}));
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
  // A pack built with kZero breaks the kContinue invariant and vice versa.
  PackOptions other = o;
  other.pad_positions = PadPositions::kContinue;
  EXPECT_THROW(check_pack_invariants(p.view(), other), InternalError);
}

TEST(PackSamples, CustomPadAndIgnoreIds) {
  const std::vector<Sample> samples = {make_sample(1, {5, 6}), make_sample(2, {8})};
  PackOptions o;
  o.divisor = 3;
  o.pad_id = 77;
  o.ignore_id = -1;
  const PackedBatch p = pack(samples, o);
  EXPECT_EQ(p.tokens, (I64{5, 6, 77, 8, 77, 77}));
  EXPECT_EQ(p.labels, (I64{6, -1, -1, -1, -1, -1}));
  EXPECT_EQ(p.loss_mask, (F32{1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(p.position_ids, (I64{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(p.padding_mask, (U8{0, 0, 1, 0, 1, 1}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 2, 3}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 3, 6}));
  EXPECT_EQ(p.max_seqlen, 3);
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

TEST(PackSamples, DivisorOneHasNoPadding) {
  const std::vector<Sample> samples = {make_sample(3, {1, 2, 3}), make_sample(4, {4}),
                                       make_sample(5, {5, 6})};
  PackOptions o;
  const PackedBatch p = pack(samples, o);
  EXPECT_EQ(p.tokens, (I64{1, 2, 3, 4, 5, 6}));
  // Labels never cross sample boundaries: the last token of each sample has no label.
  EXPECT_EQ(p.labels, (I64{2, 3, -100, -100, 6, -100}));
  EXPECT_EQ(p.loss_mask, (F32{1, 1, 0, 0, 1, 0}));
  EXPECT_EQ(p.position_ids, (I64{0, 1, 2, 0, 0, 1}));
  EXPECT_EQ(p.padding_mask, (U8{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(p.cu_seqlens, p.cu_seqlens_padded);
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 4, 6}));
  EXPECT_EQ(p.max_seqlen, 3);
  EXPECT_EQ(p.sample_ids, (I64{3, 4, 5}));
}

TEST(PackSamples, SingleTokenSampleHasNoTarget) {
  const std::vector<Sample> samples = {make_sample(0, {42})};
  PackOptions o;
  o.divisor = 2;
  const PackedBatch p = pack(samples, o);
  EXPECT_EQ(p.tokens, (I64{42, 0}));
  EXPECT_EQ(p.labels, (I64{-100, -100}));
  EXPECT_EQ(p.loss_mask, (F32{0, 0}));
  EXPECT_EQ(p.position_ids, (I64{0, 1}));
  EXPECT_EQ(p.padding_mask, (U8{0, 1}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 1}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 2}));
}

TEST(PackSamples, EmptyListGivesEmptyPack) {
  PackOptions o;
  o.divisor = 4;
  const PackedBatch p = pack_samples({}, o);
  EXPECT_EQ(p.num_rows(), 0);
  EXPECT_EQ(p.cu_seqlens, (I32{0}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0}));
  EXPECT_EQ(p.max_seqlen, 0);
  EXPECT_TRUE(p.sample_ids.empty());
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

// ---------------------------------------------------------------------------------------------
// Loss mask and label conventions (dataset.hpp)

TEST(PackLabels, LossMaskWeightIsTheTargetTokensMask) {
  // loss_mask[j] marks token j as a target; position j predicts token j+1, so its weight is
  // loss_mask[j+1]; the last position has no target.
  const std::vector<Sample> samples = {make_sample(1, {1, 2, 3, 4, 5}, {0, 0, 1, 1, 0})};
  PackOptions o;
  o.divisor = 4;
  const PackedBatch p = pack(samples, o);
  EXPECT_EQ(p.labels, (I64{2, 3, 4, 5, -100, -100, -100, -100}));
  EXPECT_EQ(p.loss_mask, (F32{0, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

TEST(PackLabels, FractionalLossWeightsAreCopied) {
  const std::vector<Sample> samples = {make_sample(1, {1, 2, 3}, {0.25f, 0.5f, 0.75f})};
  const PackedBatch p = pack(samples, PackOptions{});
  EXPECT_EQ(p.loss_mask, (F32{0.5f, 0.75f, 0}));
}

TEST(PackLabels, AlignedLabelsAreShiftedByOne) {
  // Hugging Face convention: labels[j] is input_ids[j] or -100; position j's label is labels[j+1].
  const std::vector<Sample> samples = {
      make_sample(1, {1, 2, 3, 4, 5}, {}, {-100, -100, 3, 4, 5}),
      make_sample(2, {6, 7, 8}, {}, {60, 70, 80})};  // labels differ from tokens: labels win
  PackOptions o;
  o.divisor = 2;
  const PackedBatch p = pack(samples, o);
  EXPECT_EQ(p.tokens, (I64{1, 2, 3, 4, 5, 0, 6, 7, 8, 0}));
  EXPECT_EQ(p.labels, (I64{-100, 3, 4, 5, -100, -100, 70, 80, -100, -100}));
  EXPECT_EQ(p.loss_mask, (F32{0, 1, 1, 1, 0, 0, 1, 1, 0, 0}));
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

TEST(PackLabels, AlignedLabelsAndLossMaskBothApply) {
  // loss_mask zero or label ignored -> weight 0.
  const std::vector<Sample> samples = {
      make_sample(1, {1, 2, 3, 4, 5}, {1, 1, 0, 1, 1}, {1, 2, 3, -100, 5})};
  const PackedBatch p = pack(samples, PackOptions{});
  EXPECT_EQ(p.labels, (I64{2, 3, -100, 5, -100}));
  // Position j: loss_mask[j+1] && labels[j+1] != -100.
  EXPECT_EQ(p.loss_mask, (F32{1, 0, 0, 1, 0}));
}

TEST(PackLabels, ShiftedLabelsAreUsedAsTheyAre) {
  // Megatron's SFT datasets store labels already shifted: labels[j] is position j's target, so
  // the last position of the sample may carry a label.
  const std::vector<Sample> samples = {
      make_sample(4, {1, 2, 3, 4}, {}, {2, -100, 4, 9}, /*shifted=*/true),
      make_sample(5, {5, 6}, {}, {6, -100}, /*shifted=*/true)};
  PackOptions o;
  o.divisor = 4;
  const PackedBatch p = pack(samples, o);
  EXPECT_EQ(p.tokens, (I64{1, 2, 3, 4, 5, 6, 0, 0}));
  EXPECT_EQ(p.labels, (I64{2, -100, 4, 9, 6, -100, -100, -100}));
  EXPECT_EQ(p.loss_mask, (F32{1, 0, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(p.position_ids, (I64{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

TEST(PackLabels, ShiftedLabelsWithLossMaskUseTheMaskUnshifted) {
  const std::vector<Sample> samples = {
      make_sample(4, {1, 2, 3, 4}, {1, 1, 0, 1}, {2, -100, 4, 9}, /*shifted=*/true)};
  const PackedBatch p = pack(samples, PackOptions{});
  EXPECT_EQ(p.labels, (I64{2, -100, 4, 9}));
  EXPECT_EQ(p.loss_mask, (F32{1, 0, 0, 1}));
}

TEST(PackLabels, IgnoreMaskedLabelsGivesMaskedPositionsTheIgnoreLabel) {
  // A prompt masked by loss_mask: with the option, a loss with ignore_index alone skips it.
  const std::vector<Sample> samples = {make_sample(1, {1, 2, 3, 4, 5}, {0, 0, 1, 1, 0})};
  PackOptions o;
  o.divisor = 4;
  o.ignore_masked_labels = true;
  const PackedBatch p = pack(samples, o);
  EXPECT_EQ(p.labels, (I64{-100, 3, 4, -100, -100, -100, -100, -100}));
  EXPECT_EQ(p.loss_mask, (F32{0, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

TEST(PackLabels, IgnoreMaskedLabelsChangesOnlyLabelsWithoutWeight) {
  // Every label convention (none, aligned, shifted) with random masks: with the option a label is
  // ignore_id exactly where the weight is 0, and nothing else differs from the pack without it.
  std::mt19937_64 rng(29);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Sample> samples;
    const int count = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < count; ++k) {
      Sample s;
      s.id = k;
      const int64_t n = 1 + static_cast<int64_t>(rng() % 9);
      for (int64_t j = 0; j < n; ++j) {
        s.input_ids.push_back(1 + static_cast<int64_t>(rng() % 50));
        s.loss_mask.push_back(rng() % 3 == 0 ? 0.0f : 1.0f);
      }
      const int convention = static_cast<int>(rng() % 3);  // 0 none, 1 aligned, 2 shifted labels
      if (convention > 0) {
        for (int64_t j = 0; j < n; ++j) {
          s.labels.push_back(rng() % 4 == 0 ? -100 : s.input_ids[static_cast<size_t>(j)]);
        }
        s.labels_shifted = convention == 2;
        if (rng() % 2 == 0) s.loss_mask.clear();
      }
      samples.push_back(std::move(s));
    }
    PackOptions off;
    off.divisor = 1 + static_cast<int64_t>(rng() % 4);
    PackOptions on = off;
    on.ignore_masked_labels = true;
    const PackedBatch a = pack(samples, off);
    const PackedBatch b = pack(samples, on);
    ASSERT_EQ(a.tokens, b.tokens);
    ASSERT_EQ(a.loss_mask, b.loss_mask);
    ASSERT_EQ(a.cu_seqlens, b.cu_seqlens);
    ASSERT_EQ(a.position_ids, b.position_ids);
    for (size_t i = 0; i < b.labels.size(); ++i) {
      ASSERT_EQ(b.labels[i] == on.ignore_id, b.loss_mask[i] == 0.0f) << "trial " << trial;
      if (b.loss_mask[i] != 0.0f) {
        ASSERT_EQ(a.labels[i], b.labels[i]) << "trial " << trial;
      }
    }
    ASSERT_NO_THROW(check_pack_invariants(b.view(), on));
  }
}

// ---------------------------------------------------------------------------------------------
// Tail padding and fixed cu_seqlens

std::vector<Sample> two_samples() {
  return {make_sample(7, {11, 12, 13}), make_sample(9, {21, 22, 23, 24, 25})};
}

TEST(PackTail, MultipleWithDummySequence) {
  PackOptions o;
  o.divisor = 4;
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 16;
  o.tail_policy = TailPolicy::kAppendDummySeq;
  const PackedBatch p = pack(two_samples(), o);
  ASSERT_EQ(p.num_rows(), 16);
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 8, 8}));  // the dummy sequence has real length 0
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 4, 12, 16}));
  EXPECT_EQ(p.max_seqlen, 8);
  EXPECT_EQ(p.sample_ids, (I64{7, 9}));
  EXPECT_EQ(p.tokens, (I64{11, 12, 13, 0, 21, 22, 23, 24, 25, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(p.position_ids, (I64{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3}));
  EXPECT_EQ(p.padding_mask, (U8{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1}));
  for (int64_t r = 12; r < 16; ++r) {
    EXPECT_EQ(p.labels[static_cast<size_t>(r)], -100);
    EXPECT_EQ(p.loss_mask[static_cast<size_t>(r)], 0.0f);
  }
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

TEST(PackTail, DummySequenceLongerThanEverySampleSetsMaxSeqlen) {
  PackOptions o;
  o.divisor = 4;
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 32;
  const PackedBatch p = pack(two_samples(), o);
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 4, 12, 32}));
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 8, 8}));
  EXPECT_EQ(p.max_seqlen, 20);
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

TEST(PackTail, MultipleWithExtendLast) {
  PackOptions o;
  o.divisor = 4;
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 16;
  o.tail_policy = TailPolicy::kExtendLast;
  const PackedBatch p = pack(two_samples(), o);
  ASSERT_EQ(p.num_rows(), 16);
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 8}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 4, 16}));
  EXPECT_EQ(p.max_seqlen, 12);
  EXPECT_EQ(p.tokens, (I64{11, 12, 13, 0, 21, 22, 23, 24, 25, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(p.labels, (I64{12, 13, -100, -100, 22, 23, 24, 25, -100, -100, -100, -100, -100, -100,
                           -100, -100}));
  EXPECT_EQ(p.position_ids, (I64{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(p.padding_mask, (U8{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

TEST(PackTail, CapacityWithBothPolicies) {
  PackOptions o;
  o.divisor = 4;
  o.capacity = 24;
  o.tail_align = TailAlign::kCapacity;
  o.tail_policy = TailPolicy::kAppendDummySeq;
  const PackedBatch dummy = pack(two_samples(), o);
  EXPECT_EQ(dummy.num_rows(), 24);
  EXPECT_EQ(dummy.cu_seqlens, (I32{0, 3, 8, 8}));
  EXPECT_EQ(dummy.cu_seqlens_padded, (I32{0, 4, 12, 24}));
  EXPECT_EQ(dummy.max_seqlen, 12);
  EXPECT_NO_THROW(check_pack_invariants(dummy.view(), o));

  o.tail_policy = TailPolicy::kExtendLast;
  const PackedBatch extend = pack(two_samples(), o);
  EXPECT_EQ(extend.num_rows(), 24);
  EXPECT_EQ(extend.cu_seqlens, (I32{0, 3, 8}));
  EXPECT_EQ(extend.cu_seqlens_padded, (I32{0, 4, 24}));
  EXPECT_EQ(extend.max_seqlen, 20);
  EXPECT_EQ(extend.position_ids[23], 19);
  EXPECT_NO_THROW(check_pack_invariants(extend.view(), o));
}

TEST(PackTail, AlreadyAlignedAddsNothing) {
  PackOptions o;
  o.divisor = 4;
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 12;
  const PackedBatch p = pack(two_samples(), o);
  EXPECT_EQ(p.num_rows(), 12);
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 8}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 4, 12}));

  o.tail_align = TailAlign::kCapacity;
  o.capacity = 12;
  o.tail_policy = TailPolicy::kExtendLast;
  const PackedBatch q = pack(two_samples(), o);
  EXPECT_EQ(q.cu_seqlens_padded, (I32{0, 4, 12}));
  EXPECT_EQ(q.max_seqlen, 8);
}

TEST(PackTail, FixedCuSeqlensEntriesRepeatTheLastValue) {
  PackOptions o;
  o.divisor = 4;
  o.fixed_cu_seqlens_entries = 5;
  const PackedBatch p = pack(two_samples(), o);
  EXPECT_EQ(p.cu_seqlens, (I32{0, 3, 8, 8, 8}));
  EXPECT_EQ(p.cu_seqlens_padded, (I32{0, 4, 12, 12, 12}));
  EXPECT_EQ(p.num_rows(), 12);
  EXPECT_EQ(p.max_seqlen, 8);
  EXPECT_EQ(p.sample_ids, (I64{7, 9}));
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));

  // Together with a dummy tail sequence: the dummy counts as a sequence.
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 16;
  const PackedBatch q = pack(two_samples(), o);
  EXPECT_EQ(q.cu_seqlens, (I32{0, 3, 8, 8, 8}));
  EXPECT_EQ(q.cu_seqlens_padded, (I32{0, 4, 12, 16, 16}));
  EXPECT_NO_THROW(check_pack_invariants(q.view(), o));

  // Exactly B+1 entries is fine.
  o.tail_align = TailAlign::kNone;
  o.fixed_cu_seqlens_entries = 3;
  EXPECT_EQ(pack(two_samples(), o).cu_seqlens, (I32{0, 3, 8}));
}

TEST(PackTail, TooManySequencesForFixedEntriesIsAnError) {
  PackOptions o;
  o.divisor = 4;
  o.fixed_cu_seqlens_entries = 2;
  test_util::expect_throw_with<InvalidArgument>([&] { pack(two_samples(), o); },
                                                {"fixed_cu_seqlens_entries"});
  // The dummy tail sequence needs an entry too.
  o.fixed_cu_seqlens_entries = 3;
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 16;
  EXPECT_THROW(pack(two_samples(), o), InvalidArgument);
  // ... but extending the last sequence does not.
  o.tail_policy = TailPolicy::kExtendLast;
  EXPECT_NO_THROW(pack(two_samples(), o));
}

TEST(PackTail, InconsistentTailOptionsAreErrors) {
  PackOptions o;
  o.divisor = 4;
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 6;  // not a multiple of the divisor
  test_util::expect_throw_with<InvalidArgument>([&] { pack(two_samples(), o); }, {"tail_multiple"});
  o.tail_multiple = 0;
  EXPECT_THROW(pack(two_samples(), o), InvalidArgument);
  o.tail_multiple = -8;
  EXPECT_THROW(pack(two_samples(), o), InvalidArgument);

  o.tail_align = TailAlign::kCapacity;
  o.capacity = 0;  // no capacity to align to
  EXPECT_THROW(pack(two_samples(), o), InvalidArgument);
  o.capacity = 26;  // not a multiple of the divisor
  EXPECT_THROW(pack(two_samples(), o), InvalidArgument);

  // T <= C: a tail multiple that does not divide the capacity can overshoot it.
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 24;
  o.capacity = 20;  // 12 rows fit, but rounding up to 24 does not
  test_util::expect_throw_with<InvalidArgument>([&] { pack(two_samples(), o); },
                                                {"over the capacity"});
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(PackErrors, EmptySample) {
  const std::vector<Sample> samples = {make_sample(3, {1, 2}), make_sample(17, {})};
  test_util::expect_throw_with<InvalidArgument>([&] { pack(samples, PackOptions{}); },
                                                {"sample 17"});
}

TEST(PackErrors, MismatchedLossMaskLength) {
  const std::vector<Sample> samples = {make_sample(5, {1, 2, 3}, {1, 1})};
  test_util::expect_throw_with<InvalidArgument>([&] { pack(samples, PackOptions{}); },
                                                {"sample 5", "loss_mask"});
}

TEST(PackErrors, MismatchedLabelsLength) {
  const std::vector<Sample> samples = {make_sample(6, {1, 2, 3}, {}, {1, 2, 3, 4})};
  test_util::expect_throw_with<InvalidArgument>([&] { pack(samples, PackOptions{}); },
                                                {"sample 6", "labels"});
}

TEST(PackErrors, SingleSampleOverCapacitySaysHowToFix) {
  const std::vector<Sample> samples = {make_sample(17, I64(40, 1))};
  PackOptions o;
  o.capacity = 32;
  test_util::expect_throw_with<InvalidArgument>(
      [&] { pack(samples, o); },
      {"17", "40", "32", "raise max_seqlen_per_dp_cp_rank (-M)", "oversize=\"truncate\""});
}

TEST(PackErrors, CapacityCountsPaddedLengths) {
  // 5 real tokens fit in 6, but padded to 8 they do not.
  const std::vector<Sample> samples = {make_sample(2, {1, 2, 3, 4, 5})};
  PackOptions o;
  o.divisor = 4;
  o.capacity = 6;
  EXPECT_THROW(pack(samples, o), InvalidArgument);
  o.capacity = 8;
  EXPECT_NO_THROW(pack(samples, o));
}

TEST(PackErrors, SeveralSamplesOverCapacity) {
  PackOptions o;
  o.divisor = 4;
  o.capacity = 11;
  test_util::expect_throw_with<InvalidArgument>([&] { pack(two_samples(), o); }, {"12", "11"});
  o.capacity = 12;  // exactly at capacity is fine
  const PackedBatch p = pack(two_samples(), o);
  EXPECT_EQ(p.num_rows(), 12);
  EXPECT_NO_THROW(check_pack_invariants(p.view(), o));
}

TEST(PackErrors, DivisorBelowOne) {
  PackOptions o;
  o.divisor = 0;
  EXPECT_THROW(pack(two_samples(), o), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Property test: thousands of random packs

constexpr int64_t kDivisors[] = {1, 2, 4, 8, 16};

struct RandomCase {
  std::vector<Sample> samples;
  PackOptions options;
};

RandomCase random_case(std::mt19937_64& rng) {
  RandomCase c;
  PackOptions& o = c.options;
  o.divisor = kDivisors[rng() % 5];
  o.pad_id = -7;
  o.ignore_id = -100;
  o.pad_positions = rng() % 2 ? PadPositions::kContinue : PadPositions::kZero;
  const int n = 1 + static_cast<int>(rng() % 8);
  std::uniform_int_distribution<int64_t> long_len(1, 5000);
  std::uniform_int_distribution<int64_t> short_len(1, 40);
  int64_t padded_total = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t len = rng() % 3 == 0 ? short_len(rng) : long_len(rng);
    Sample s;
    s.id = static_cast<int64_t>(rng() % 1000000);
    // Distinct token values across the whole pack: sample i, position j -> (i+1)·10^6 + j.
    s.input_ids.resize(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) s.input_ids[static_cast<size_t>(j)] = (i + 1) * 1000000 + j;
    if (rng() % 3 == 0) {
      s.loss_mask.resize(static_cast<size_t>(len));
      for (auto& m : s.loss_mask) m = static_cast<float>(rng() % 2);
    }
    padded_total += round_up(len, o.divisor);
    c.samples.push_back(std::move(s));
  }
  switch (rng() % 3) {
    case 0:
      o.tail_align = TailAlign::kNone;
      break;
    case 1:
      o.tail_align = TailAlign::kMultiple;
      o.tail_multiple = o.divisor * static_cast<int64_t>(1 + rng() % 64);
      break;
    default:
      o.tail_align = TailAlign::kCapacity;
      break;
  }
  o.tail_policy = rng() % 2 ? TailPolicy::kAppendDummySeq : TailPolicy::kExtendLast;
  if (o.tail_align == TailAlign::kCapacity || rng() % 2) {
    // T <= C: with a tail multiple the capacity must hold the rounded-up pack.
    const int64_t unit = o.tail_align == TailAlign::kMultiple ? o.tail_multiple : o.divisor;
    o.capacity = round_up(padded_total, unit) + unit * static_cast<int64_t>(rng() % 5);
  }
  if (rng() % 3 == 0) o.fixed_cu_seqlens_entries = n + 2 + static_cast<int64_t>(rng() % 4);
  return c;
}

TEST(PackProperty, RandomPacksKeepEveryInvariant) {
  constexpr int kCases = 3000;
  for (int seed = 0; seed < kCases; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const RandomCase c = random_case(rng);
    const PackOptions& o = c.options;
    const auto views = views_of(c.samples);
    const PackedBatch p = pack_samples(views, o);
    ASSERT_NO_THROW(check_pack_invariants(p.view(), o));

    const auto b = static_cast<int64_t>(c.samples.size());
    int64_t real_total = 0, padded_total = 0;
    for (const auto& s : c.samples) {
      real_total += static_cast<int64_t>(s.input_ids.size());
      padded_total += round_up(static_cast<int64_t>(s.input_ids.size()), o.divisor);
    }
    int64_t want_rows = padded_total;
    if (o.tail_align == TailAlign::kMultiple) want_rows = round_up(padded_total, o.tail_multiple);
    if (o.tail_align == TailAlign::kCapacity) want_rows = o.capacity;
    ASSERT_EQ(p.num_rows(), want_rows);
    ASSERT_EQ(p.labels.size(), p.tokens.size());
    ASSERT_EQ(p.loss_mask.size(), p.tokens.size());
    ASSERT_EQ(p.position_ids.size(), p.tokens.size());
    ASSERT_EQ(p.padding_mask.size(), p.tokens.size());
    const bool has_tail = want_rows > padded_total;
    const bool dummy = has_tail && o.tail_policy == TailPolicy::kAppendDummySeq;
    const int64_t sequences = b + (dummy ? 1 : 0);

    // cu arrays: start at 0, non-decreasing, end at the real / padded totals.
    const auto entries = static_cast<int64_t>(p.cu_seqlens.size());
    ASSERT_EQ(p.cu_seqlens_padded.size(), p.cu_seqlens.size());
    ASSERT_EQ(entries, o.fixed_cu_seqlens_entries > 0 ? o.fixed_cu_seqlens_entries : sequences + 1);
    EXPECT_EQ(p.cu_seqlens.front(), 0);
    EXPECT_EQ(p.cu_seqlens_padded.front(), 0);
    EXPECT_EQ(p.cu_seqlens.back(), real_total);
    EXPECT_EQ(p.cu_seqlens_padded.back(), want_rows);
    int64_t max_padded = 0;
    for (int64_t i = 0; i + 1 < entries; ++i) {
      const auto k = static_cast<size_t>(i);
      const int64_t real = p.cu_seqlens[k + 1] - p.cu_seqlens[k];
      const int64_t padded = p.cu_seqlens_padded[k + 1] - p.cu_seqlens_padded[k];
      ASSERT_GE(real, 0) << "sequence " << i;
      ASSERT_GE(padded - real, 0) << "sequence " << i;
      ASSERT_EQ(padded % o.divisor, 0) << "sequence " << i;
      max_padded = std::max(max_padded, padded);
      if (i < b) {
        ASSERT_EQ(real, static_cast<int64_t>(c.samples[k].input_ids.size())) << "sequence " << i;
        const bool last_extended = has_tail && !dummy && i == b - 1;
        if (!last_extended) {
          ASSERT_EQ(padded, round_up(real, o.divisor)) << "sequence " << i;
        }
      } else if (i == b && dummy) {
        ASSERT_EQ(real, 0);
        ASSERT_EQ(padded, want_rows - padded_total);
      } else {
        ASSERT_EQ(real, 0);
        ASSERT_EQ(padded, 0);
      }
    }
    EXPECT_EQ(p.max_seqlen, max_padded);
    EXPECT_EQ(p.sample_ids.size(), c.samples.size());

    // Every token is where it belongs, with its label, mask and position; every other row is
    // padding. Token values are distinct, so nothing is lost, duplicated or moved.
    std::vector<int> seen(static_cast<size_t>(want_rows), 0);
    for (int64_t i = 0; i < b; ++i) {
      const auto& s = c.samples[static_cast<size_t>(i)];
      EXPECT_EQ(p.sample_ids[static_cast<size_t>(i)], s.id);
      const int64_t at = p.cu_seqlens_padded[static_cast<size_t>(i)];
      const auto len = static_cast<int64_t>(s.input_ids.size());
      for (int64_t j = 0; j < len; ++j) {
        const auto r = static_cast<size_t>(at + j);
        const auto sj = static_cast<size_t>(j);
        ++seen[r];
        ASSERT_EQ(p.tokens[r], s.input_ids[sj]) << "sample " << i << " position " << j;
        ASSERT_EQ(p.position_ids[r], j);
        ASSERT_EQ(p.padding_mask[r], 0);
        const bool last = j == len - 1;
        ASSERT_EQ(p.labels[r], last ? -100 : s.input_ids[sj + 1]);
        const float want_mask = last ? 0.0f : (s.loss_mask.empty() ? 1.0f : s.loss_mask[sj + 1]);
        ASSERT_EQ(p.loss_mask[r], want_mask) << "sample " << i << " position " << j;
      }
    }
    for (int64_t r = 0; r < want_rows; ++r) {
      const auto k = static_cast<size_t>(r);
      if (seen[k] == 1) continue;
      ASSERT_EQ(seen[k], 0);
      ASSERT_EQ(p.tokens[k], o.pad_id) << "row " << r;
      ASSERT_EQ(p.labels[k], o.ignore_id) << "row " << r;
      ASSERT_EQ(p.loss_mask[k], 0.0f) << "row " << r;
      ASSERT_EQ(p.padding_mask[k], 1) << "row " << r;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// check_pack_invariants detects corruption

class PackInvariantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    samples_ = {make_sample(7, {11, 12, 13}), make_sample(9, {21, 22, 23, 24, 25})};
    options_.divisor = 4;
    good_ = pack(samples_, options_);
    ASSERT_NO_THROW(check_pack_invariants(good_.view(), options_));
  }

  void expect_broken(const PackedBatch& p, const PackOptions& o) {
    EXPECT_THROW(check_pack_invariants(p.view(), o), InternalError);
  }
  void expect_broken(const PackedBatch& p) { expect_broken(p, options_); }

  std::vector<Sample> samples_;
  PackOptions options_;
  PackedBatch good_;
};

TEST_F(PackInvariantsTest, PaddingMaskBitFlipped) {
  for (size_t r = 0; r < good_.padding_mask.size(); ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    PackedBatch p = good_;
    p.padding_mask[r] ^= 1;
    expect_broken(p);
  }
}

TEST_F(PackInvariantsTest, PositionIdBroken) {
  for (size_t r = 0; r < good_.position_ids.size(); ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    PackedBatch p = good_;
    p.position_ids[r] += 1;
    expect_broken(p);
  }
}

TEST_F(PackInvariantsTest, WrongMaxSeqlen) {
  PackedBatch p = good_;
  p.max_seqlen = 4;
  expect_broken(p);
  p.max_seqlen = 12;
  expect_broken(p);
}

TEST_F(PackInvariantsTest, PaddingRowContent) {
  {
    PackedBatch p = good_;
    p.tokens[3] = 5;  // a padding row with a real token id
    expect_broken(p);
  }
  {
    PackedBatch p = good_;
    p.labels[10] = 1;
    expect_broken(p);
  }
  {
    PackedBatch p = good_;
    p.loss_mask[11] = 1.0f;
    expect_broken(p);
  }
}

TEST_F(PackInvariantsTest, FieldLengthsDiffer) {
  PackedBatch p = good_;
  p.labels.pop_back();
  expect_broken(p);
  PackedBatch q = good_;
  q.padding_mask.push_back(1);
  expect_broken(q);
}

TEST_F(PackInvariantsTest, CuArraysDisagreeWithRows) {
  PackedBatch p = good_;
  p.cu_seqlens_padded.back() = 16;  // 12 rows in the pack
  expect_broken(p);
}

TEST_F(PackInvariantsTest, MalformedCuArraysAreInternalErrors) {
  {
    PackedBatch p = good_;
    p.cu_seqlens[0] = 1;  // does not start at 0
    expect_broken(p);
  }
  {
    PackedBatch p = good_;
    p.cu_seqlens[1] = 5;  // real length 5 > padded length 4
    expect_broken(p);
  }
  {
    PackedBatch p = good_;
    p.cu_seqlens.pop_back();  // entries differ
    expect_broken(p);
  }
}

TEST_F(PackInvariantsTest, PaddedLengthNotDivisible) {
  PackOptions o = options_;
  o.divisor = 8;  // sequence 0 has padded length 4
  expect_broken(good_, o);
}

TEST_F(PackInvariantsTest, OverCapacity) {
  PackOptions o = options_;
  o.capacity = 8;
  expect_broken(good_, o);
}

TEST_F(PackInvariantsTest, SlicedPackIsNotWhole) {
  PackedBatch p = good_;
  p.cp_size = 2;
  expect_broken(p);
}

}  // namespace
}  // namespace thdpack
