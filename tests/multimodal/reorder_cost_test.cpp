// The per-sample reordering cost (SPEC §8): patches from image placeholders, real tokens, the
// weighted sum, validation of the cost settings and the consistency check of a sample's vision
// data with its placeholders.

#include <gtest/gtest.h>

#include "expect_throw.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/reorder.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;

constexpr int64_t kImage = 9;  // the image placeholder token of these tests

ReorderCost cost_with(int64_t merge, double vision = 1.0, double text = 0.0, int64_t pad = 0) {
  ReorderCost c;
  c.vision_weight = vision;
  c.text_weight = text;
  c.image_token_id = kImage;
  c.spatial_merge_size = merge;
  c.pad_id = pad;
  return c;
}

SampleField grid_field(const I64& rows_of_three, int64_t images) {
  SampleField f = SampleField::of_int64(rows_of_three);
  f.shape = {images, 3};
  return f;
}

SampleField pixels_field(int64_t rows, int64_t dim = 2) {
  std::vector<float> values(static_cast<size_t>(rows * dim), 0.5f);
  return SampleField::of_float32(values, {rows, dim});
}

/// A sample with `placeholders` image tokens among some text, the given grid rows (flattened) and
/// pixel rows.
MultimodalSample vision_sample(int64_t id, int64_t placeholders, const I64& grid,
                               int64_t pixel_rows) {
  // 1 2 3, the placeholders, 4 5, two pads.
  I64 ids(static_cast<size_t>(placeholders) + 7, kImage);
  const size_t n = ids.size();
  ids[0] = 1;
  ids[1] = 2;
  ids[2] = 3;
  ids[n - 4] = 4;
  ids[n - 3] = 5;
  ids[n - 2] = 0;
  ids[n - 1] = 0;
  MultimodalSample s;
  s.id = id;
  s.fields[kInputIdsField] = SampleField::of_int64(ids);
  s.fields[kImageGridField] = grid_field(grid, static_cast<int64_t>(grid.size() / 3));
  s.fields[kPixelValuesField] = pixels_field(pixel_rows);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Patches, real tokens, cost

TEST(ReorderCostParts, ImagePatchesArePlaceholdersTimesMergeSquared) {
  const I64 ids = {1, kImage, kImage, 3, kImage, 0, 0};
  EXPECT_EQ(image_patches(ids, cost_with(2)), 3 * 4);
  EXPECT_EQ(image_patches(ids, cost_with(3)), 3 * 9);
  EXPECT_EQ(image_patches(ids, cost_with(1)), 3);
  EXPECT_EQ(image_patches(I64{1, 2, 3}, cost_with(2)), 0);
  EXPECT_EQ(image_patches(I64{}, cost_with(2)), 0);
  // Another placeholder id: only that one counts.
  ReorderCost other = cost_with(2);
  other.image_token_id = 3;
  EXPECT_EQ(image_patches(ids, other), 4);
  // The default (-1) counts nothing in ordinary ids.
  EXPECT_EQ(image_patches(ids, ReorderCost{}), 0);
}

TEST(ReorderCostParts, RealTokensExcludePadIds) {
  const I64 ids = {5, 0, kImage, 6, 0, 0};
  EXPECT_EQ(real_tokens(ids, cost_with(2)), 3);  // placeholders are real tokens
  EXPECT_EQ(real_tokens(ids, cost_with(2, 1.0, 0.0, /*pad=*/6)), 5);
  EXPECT_EQ(real_tokens(ids, cost_with(2, 1.0, 0.0, /*pad=*/-7)), 6);
  EXPECT_EQ(real_tokens(I64{0, 0, 0}, cost_with(2)), 0);
  EXPECT_EQ(real_tokens(I64{}, cost_with(2)), 0);
}

TEST(ReorderCostParts, SampleCostWeighsBoth) {
  const I64 ids = {kImage, kImage, 1, 2, 0};  // 2 placeholders -> 8 patches; 4 real tokens
  EXPECT_DOUBLE_EQ(sample_cost(ids, cost_with(2)), 8.0);  // defaults: vision only
  EXPECT_DOUBLE_EQ(sample_cost(ids, cost_with(2, 0.5, 2.0)), 0.5 * 8 + 2.0 * 4);
  EXPECT_DOUBLE_EQ(sample_cost(ids, cost_with(2, 0.0, 1.0)), 4.0);  // text only
  EXPECT_DOUBLE_EQ(sample_cost(ids, cost_with(3, 1.0, 0.25)), 18.0 + 1.0);
  EXPECT_DOUBLE_EQ(sample_cost(I64{1, 2, 3}, cost_with(2)), 0.0);  // no image: 0 vision cost
  EXPECT_DOUBLE_EQ(sample_cost(I64{1, 2, 3}, cost_with(2, 1.0, 1.5)), 4.5);
}

// ---------------------------------------------------------------------------------------------
// validate

TEST(ReorderCostValidate, DefaultsAndOneZeroWeightAreFine) {
  EXPECT_NO_THROW(validate(ReorderCost{}, true));
  EXPECT_NO_THROW(validate(ReorderCost{}, false));
  EXPECT_NO_THROW(validate(cost_with(2, 0.0, 1.0), true));
  EXPECT_NO_THROW(validate(cost_with(2, 3.0, 0.0), true));
  EXPECT_NO_THROW(validate(cost_with(1, 0.5, 0.5), true));
}

TEST(ReorderCostValidate, BadWeights) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (bool reordering : {true, false}) {
    EXPECT_THROW(validate(cost_with(2, -1.0, 0.0), reordering), InvalidArgument);
    EXPECT_THROW(validate(cost_with(2, 1.0, -0.5), reordering), InvalidArgument);
    EXPECT_THROW(validate(cost_with(2, nan, 1.0), reordering), InvalidArgument);
    EXPECT_THROW(validate(cost_with(2, 1.0, nan), reordering), InvalidArgument);
    EXPECT_THROW(validate(cost_with(2, inf, 1.0), reordering), InvalidArgument);
    EXPECT_THROW(validate(cost_with(2, 1.0, inf), reordering), InvalidArgument);
    EXPECT_THROW(validate(cost_with(2, -inf, 1.0), reordering), InvalidArgument);
  }
}

TEST(ReorderCostValidate, MergeSizeBelowOne) {
  for (bool reordering : {true, false}) {
    EXPECT_THROW(validate(cost_with(0), reordering), InvalidArgument);
    EXPECT_THROW(validate(cost_with(-2), reordering), InvalidArgument);
  }
}

TEST(ReorderCostValidate, BothWeightsZeroOnlyWhenReordering) {
  EXPECT_THROW(validate(cost_with(2, 0.0, 0.0), true), InvalidArgument);
  EXPECT_NO_THROW(validate(cost_with(2, 0.0, 0.0), false));
}

// ---------------------------------------------------------------------------------------------
// check_vision_fields

TEST(ReorderCostVision, ConsistentSamplesPass) {
  // Grid (1,2,4) = 8 and (1,4,4) = 16 patches: 24 = 6 placeholders at merge 2.
  EXPECT_NO_THROW(check_vision_fields(vision_sample(1, 6, {1, 2, 4, 1, 4, 4}, 24), cost_with(2)));
  // t > 1: (2,2,2) = 8 patches = 2 placeholders.
  EXPECT_NO_THROW(check_vision_fields(vision_sample(2, 2, {2, 2, 2}, 8), cost_with(2)));
  // merge 3: (1,3,6) = 18 patches = 2 placeholders.
  EXPECT_NO_THROW(check_vision_fields(vision_sample(3, 2, {1, 3, 6}, 18), cost_with(3)));
}

TEST(ReorderCostVision, TextOnlySamplesPass) {
  // No images: grid [0,3], pixel_values with 0 rows.
  EXPECT_NO_THROW(check_vision_fields(vision_sample(4, 0, {}, 0), cost_with(2)));
  // No vision fields at all: nothing to check, even with placeholder tokens.
  MultimodalSample s;
  s.id = 5;
  s.fields[kInputIdsField] = SampleField::of_int64(I64{1, kImage, kImage, 2});
  EXPECT_NO_THROW(check_vision_fields(s, cost_with(2)));
  s.fields[kInputIdsField] = SampleField::of_int64(I64{1, 2, 3});
  EXPECT_NO_THROW(check_vision_fields(s, cost_with(2)));
}

TEST(ReorderCostVision, PixelValuesAloneAreChecked) {
  MultimodalSample s;
  s.id = 6006;
  s.fields[kInputIdsField] = SampleField::of_int64(I64{1, kImage, kImage, kImage, kImage, 2});
  s.fields[kPixelValuesField] = pixels_field(16);
  EXPECT_NO_THROW(check_vision_fields(s, cost_with(2)));
  s.fields[kPixelValuesField] = pixels_field(13);
  test_util::expect_throw_with<InvalidArgument>([&] { check_vision_fields(s, cost_with(2)); },
                                                {"6006", "13", "16"});
}

TEST(ReorderCostVision, GridSumDisagreesWithPlaceholders) {
  // Grid sums 8 + 20 = 28 patches, placeholders make 6·4 = 24.
  const MultimodalSample s = vision_sample(4321, 6, {1, 2, 4, 1, 4, 5}, 24);
  test_util::expect_throw_with<InvalidArgument>([&] { check_vision_fields(s, cost_with(2)); },
                                                {"4321", "28", "24"});
  // Images without placeholders.
  const MultimodalSample none = vision_sample(4322, 0, {1, 2, 2}, 0);
  test_util::expect_throw_with<InvalidArgument>([&] { check_vision_fields(none, cost_with(2)); },
                                                "4322");
  // Placeholders without images.
  const MultimodalSample orphan = vision_sample(4323, 1, {}, 0);
  test_util::expect_throw_with<InvalidArgument>([&] { check_vision_fields(orphan, cost_with(2)); },
                                                "4323");
  // The same sample is consistent at another merge size (placeholders · 9 = 54 = 2·3·9).
  EXPECT_NO_THROW(check_vision_fields(vision_sample(4324, 6, {1, 6, 9}, 54), cost_with(3)));
  EXPECT_THROW(check_vision_fields(vision_sample(4325, 6, {1, 6, 9}, 54), cost_with(2)),
               InvalidArgument);
}

TEST(ReorderCostVision, HugeGridsAreRefusedWithoutOverflow) {
  constexpr int64_t kSide = int64_t{1} << 20;
  // Each side allowed, but the product (2^61) is not an image.
  test_util::expect_throw_with<InvalidArgument>(
      [&] {
        check_vision_fields(vision_sample(7001, 1, {2, kSide, kSide}, 4), cost_with(2));
      },
      {"7001", "implausibly large"});
  // Many images of 2^40 patches each: the sum stops once it passes the placeholders' patches and
  // says so (overflowing int64 would need over 2^23 such images, too large for a unit test).
  I64 grid;
  for (int i = 0; i < 16385; ++i) grid.insert(grid.end(), {1, kSide, kSide});
  test_util::expect_throw_with<InvalidArgument>(
      [&] { check_vision_fields(vision_sample(7002, 1, grid, 4), cost_with(2)); },
      {"7002", "at least"});
}

TEST(ReorderCostVision, PixelRowsDisagreeWithPlaceholders) {
  const MultimodalSample s = vision_sample(5150, 6, {1, 2, 4, 1, 4, 4}, 20);
  test_util::expect_throw_with<InvalidArgument>([&] { check_vision_fields(s, cost_with(2)); },
                                                {"5150", "20", "24"});
}

TEST(ReorderCostVision, GridRowsNeedThreePositiveValues) {
  // A zero: (1,0,5) adds 0 patches, so the sums agree, but the row is still wrong.
  EXPECT_THROW(check_vision_fields(vision_sample(61, 2, {1, 2, 4, 1, 0, 5}, 8), cost_with(2)),
               InvalidArgument);
  // Two negatives whose product is positive: (1,-2,-4) = 8 patches.
  test_util::expect_throw_with<InvalidArgument>(
      [&] {
        check_vision_fields(vision_sample(62, 2, {1, -2, -4}, 8), cost_with(2));
      },
      "62");
  // t = 0.
  EXPECT_THROW(check_vision_fields(vision_sample(63, 0, {0, 2, 4}, 0), cost_with(2)),
               InvalidArgument);
  // t = -1 with h·w negative: product 8.
  EXPECT_THROW(check_vision_fields(vision_sample(64, 2, {-1, -2, 4}, 8), cost_with(2)),
               InvalidArgument);
}

TEST(ReorderCostVision, GridMustBeImagesByThree) {
  MultimodalSample s = vision_sample(71, 2, {1, 2, 4}, 8);
  s.fields[kImageGridField].shape = {3, 1};  // same bytes, [3,1]
  test_util::expect_throw_with<InvalidArgument>([&] { check_vision_fields(s, cost_with(2)); },
                                                "71");
  s.fields[kImageGridField].shape = {3};  // rank 1
  test_util::expect_throw_with<InvalidArgument>([&] { check_vision_fields(s, cost_with(2)); },
                                                "71");
  MultimodalSample four = vision_sample(72, 2, {1, 2, 4, 1}, 8);
  four.fields[kImageGridField].shape = {1, 4};  // [1,4]: an extra column
  test_util::expect_throw_with<InvalidArgument>([&] { check_vision_fields(four, cost_with(2)); },
                                                "72");
}

}  // namespace
}  // namespace thdpack
