// Static-shape option names, and the pieces of pack_samples the pipeline shares.

#include <gtest/gtest.h>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

TEST(TailOptions, NamesRoundTripAndUnknownNamesAreRefused) {
  for (TailAlign a : {TailAlign::kNone, TailAlign::kMultiple, TailAlign::kCapacity}) {
    EXPECT_EQ(parse_tail_align(tail_align_name(a)), a);
  }
  for (TailPolicy p : {TailPolicy::kAppendDummySeq, TailPolicy::kExtendLast}) {
    EXPECT_EQ(parse_tail_policy(tail_policy_name(p)), p);
  }
  test_util::expect_throw_with<InvalidArgument>([] { parse_tail_align("fixed"); }, "got 'fixed'");
  test_util::expect_throw_with<InvalidArgument>([] { parse_tail_policy("pad"); }, "got 'pad'");
}

TEST(TailOptions, AlignedRowsAndFixedEntries) {
  PackOptions o;
  o.divisor = 4;
  o.capacity = 64;
  EXPECT_EQ(aligned_pack_rows(20, o), 20);
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 16;
  EXPECT_EQ(aligned_pack_rows(20, o), 32);
  EXPECT_EQ(aligned_pack_rows(32, o), 32);
  o.tail_align = TailAlign::kCapacity;
  EXPECT_EQ(aligned_pack_rows(20, o), 64);
  o.tail_align = TailAlign::kMultiple;
  o.tail_multiple = 6;
  test_util::expect_throw_with<InvalidArgument>([&] { aligned_pack_rows(20, o); },
                                                "multiple of the padding divisor 4");
  o.tail_multiple = 48;
  test_util::expect_throw_with<InvalidArgument>([&] { aligned_pack_rows(60, o); },
                                                "over the capacity 64");

  o.fixed_cu_seqlens_entries = 5;
  std::vector<int32_t> cu{0, 3, 7}, padded{0, 4, 8};
  fix_cu_seqlens_entries(cu, padded, o);
  EXPECT_EQ(cu, (std::vector<int32_t>{0, 3, 7, 7, 7}));
  EXPECT_EQ(padded, (std::vector<int32_t>{0, 4, 8, 8, 8}));
  o.fixed_cu_seqlens_entries = 2;
  test_util::expect_throw_with<InvalidArgument>([&] { fix_cu_seqlens_entries(cu, padded, o); },
                                                "allows at most 1");
}

}  // namespace
}  // namespace thdpack
