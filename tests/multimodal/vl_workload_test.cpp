// The synthetic vision-language workload (vl_workload.hpp): validation of its settings, sample i
// depending only on (config, i), its schema, the consistency of placeholders, grid and pixel rows,
// and the statistics of text-only samples, image counts, image sides and text lengths.

#include <gtest/gtest.h>

#include "expect_throw.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/reorder.hpp"
#include "thdpack/multimodal/vl_workload.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;

/// The workload with small pixel rows, for the statistics (pixel_dim changes no count).
VisionLanguageWorkload light() {
  VisionLanguageWorkload w;
  w.pixel_dim = 1;
  return w;
}

int64_t images_of(const MultimodalSample& s) {
  return s.fields.at(kImageGridField).shape.at(0);
}

I64 ids_of(const MultimodalSample& s) {
  const auto v = s.fields.at(kInputIdsField).int64_values();
  return I64(v.begin(), v.end());
}

void expect_same_sample(const MultimodalSample& a, const MultimodalSample& b) {
  EXPECT_EQ(a.id, b.id);
  ASSERT_EQ(a.fields.size(), b.fields.size());
  for (const auto& [name, fa] : a.fields) {
    const SampleField& fb = b.fields.at(name);
    EXPECT_EQ(fa.type, fb.type) << name;
    EXPECT_EQ(fa.shape, fb.shape) << name;
    EXPECT_TRUE(fa.data == fb.data) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// validate

TEST(VlWorkloadValidate, DefaultsAreValid) {
  EXPECT_NO_THROW(validate(VisionLanguageWorkload{}));
  VisionLanguageWorkload w;
  w.text_only_fraction = 0.0;
  EXPECT_NO_THROW(validate(w));
  w.text_only_fraction = 1.0;
  EXPECT_NO_THROW(validate(w));
  w.mean_images = 1.0;
  w.min_side = w.max_side = 7;
  w.text_sigma = 0.0;
  EXPECT_NO_THROW(validate(w));
}

TEST(VlWorkloadValidate, BadSettingsNameTheKey) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  using W = VisionLanguageWorkload;
  struct Case {
    const char* key;
    void (*edit)(VisionLanguageWorkload&, double);
    double value;
  };
  const std::vector<Case> cases = {
      {"text_only_fraction", [](W& w, double v) { w.text_only_fraction = v; }, -0.1},
      {"text_only_fraction", [](W& w, double v) { w.text_only_fraction = v; }, 1.5},
      {"text_only_fraction", [](W& w, double v) { w.text_only_fraction = v; }, nan},
      {"mean_images", [](W& w, double v) { w.mean_images = v; }, 0.5},
      {"mean_images", [](W& w, double v) { w.mean_images = v; }, nan},
      {"max_images", [](W& w, double v) { w.max_images = static_cast<int64_t>(v); }, 0},
      {"min_side", [](W& w, double v) { w.min_side = static_cast<int64_t>(v); }, 0},
      {"max_side", [](W& w, double v) { w.max_side = static_cast<int64_t>(v); }, 0},
      {"side", [](W& w, double v) { w.min_side = static_cast<int64_t>(v); }, 40},
      {"median_text_tokens", [](W& w, double v) { w.median_text_tokens = static_cast<int64_t>(v); },
       0},
      {"max_text_tokens", [](W& w, double v) { w.max_text_tokens = static_cast<int64_t>(v); }, 0},
      {"text_sigma", [](W& w, double v) { w.text_sigma = v; }, -1.0},
      {"text_sigma", [](W& w, double v) { w.text_sigma = v; }, nan},
      {"pixel_dim", [](W& w, double v) { w.pixel_dim = static_cast<int64_t>(v); }, 0},
      {"spatial_merge_size", [](W& w, double v) { w.spatial_merge_size = static_cast<int64_t>(v); },
       0},
      {"vocab", [](W& w, double v) { w.vocab = static_cast<int64_t>(v); }, 1},
      // The placeholder inside the text ids [1, vocab) or on the padding id.
      {"image_token_id", [](W& w, double v) { w.image_token_id = static_cast<int64_t>(v); }, 17},
      {"image_token_id", [](W& w, double v) { w.image_token_id = static_cast<int64_t>(v); }, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + std::to_string(c.value));
    VisionLanguageWorkload w;
    c.edit(w, c.value);
    test_util::expect_throw_with<InvalidArgument>([&] { validate(w); }, c.key);
  }
}

// ---------------------------------------------------------------------------------------------
// Samples

TEST(VlWorkloadSample, DeterministicPerIndexAndIndependentOfOthers) {
  const VisionLanguageWorkload w;
  std::vector<MultimodalSample> forward;
  for (int64_t i = 0; i < 40; ++i) forward.push_back(vl_sample(w, i));
  for (int64_t i = 39; i >= 0; --i) {
    SCOPED_TRACE("index " + std::to_string(i));
    vl_sample(w, 1000 + i);  // other samples in between change nothing
    const MultimodalSample again = vl_sample(w, i);
    EXPECT_EQ(again.id, i);
    expect_same_sample(forward[static_cast<size_t>(i)], again);
  }
  // A far index on its own.
  expect_same_sample(vl_sample(w, 123456789), vl_sample(w, 123456789));
  EXPECT_EQ(vl_sample(w, 123456789).id, 123456789);
}

TEST(VlWorkloadSample, SamplesDifferAcrossIndicesAndSeeds) {
  VisionLanguageWorkload w = light();
  VisionLanguageWorkload other = light();
  other.seed = w.seed + 1;
  int differ_by_index = 0;
  int differ_by_seed = 0;
  for (int64_t i = 0; i < 20; ++i) {
    differ_by_index += ids_of(vl_sample(w, i)) != ids_of(vl_sample(w, i + 1)) ? 1 : 0;
    differ_by_seed += ids_of(vl_sample(w, i)) != ids_of(vl_sample(other, i)) ? 1 : 0;
  }
  EXPECT_EQ(differ_by_index, 20);
  EXPECT_EQ(differ_by_seed, 20);
}

TEST(VlWorkloadSample, SchemaIsVlSchema) {
  const SampleSchema expected = vl_schema();
  ASSERT_EQ(expected.fields.size(), 3u);
  EXPECT_EQ(expected.fields[0].name, kImageGridField);
  EXPECT_EQ(expected.fields[0].type, FieldType::kInt64);
  EXPECT_EQ(expected.fields[0].rank, 2);
  EXPECT_EQ(expected.fields[1].name, kInputIdsField);
  EXPECT_EQ(expected.fields[1].type, FieldType::kInt64);
  EXPECT_EQ(expected.fields[1].rank, 1);
  EXPECT_EQ(expected.fields[2].name, kPixelValuesField);
  EXPECT_EQ(expected.fields[2].type, FieldType::kFloat32);
  EXPECT_EQ(expected.fields[2].rank, 2);
  VisionLanguageWorkload w = light();
  w.text_only_fraction = 0.5;
  int text_only = 0;
  for (int64_t i = 0; i < 50; ++i) {
    const MultimodalSample s = vl_sample(w, i);
    text_only += images_of(s) == 0 ? 1 : 0;
    const SampleSchema got = schema_of(s);
    ASSERT_EQ(got.fields.size(), expected.fields.size());
    for (size_t f = 0; f < got.fields.size(); ++f) {
      EXPECT_EQ(got.fields[f].name, expected.fields[f].name);
      EXPECT_EQ(got.fields[f].type, expected.fields[f].type);
      EXPECT_EQ(got.fields[f].rank, expected.fields[f].rank);
    }
    EXPECT_EQ(got.fingerprint(), expected.fingerprint());
    EXPECT_NO_THROW(sample_dims(s, expected));
  }
  EXPECT_GT(text_only, 0);  // text-only samples have the same schema
  EXPECT_LT(text_only, 50);
}

TEST(VlWorkloadSample, CostSettingsFollowTheWorkload) {
  VisionLanguageWorkload w;
  w.image_token_id = 40000;
  w.spatial_merge_size = 3;
  const ReorderCost c = vl_cost(w);
  EXPECT_EQ(c.image_token_id, 40000);
  EXPECT_EQ(c.spatial_merge_size, 3);
  EXPECT_EQ(c.vision_weight, 1.0);
  EXPECT_EQ(c.text_weight, 0.0);
  EXPECT_EQ(c.pad_id, 0);
  const ReorderCost t = vl_cost(w, 0.25, 2.0);
  EXPECT_EQ(t.vision_weight, 0.25);
  EXPECT_EQ(t.text_weight, 2.0);
  EXPECT_NO_THROW(validate(t, true));
}

/// Checks one sample's layout against the workload and returns its text token count.
int64_t check_layout(const VisionLanguageWorkload& w, const MultimodalSample& s) {
  const int64_t merge = w.spatial_merge_size;
  const SampleField& grid = s.fields.at(kImageGridField);
  const SampleField& pixels = s.fields.at(kPixelValuesField);
  const I64 ids = ids_of(s);
  const int64_t images = grid.shape.at(0);
  EXPECT_EQ(grid.shape, (I64{images, 3}));
  const auto g = grid.int64_values();
  int64_t patches = 0;
  I64 blocks;  // placeholder tokens per image
  for (int64_t i = 0; i < images; ++i) {
    const int64_t t = g[static_cast<size_t>(3 * i)];
    const int64_t h = g[static_cast<size_t>(3 * i + 1)];
    const int64_t wd = g[static_cast<size_t>(3 * i + 2)];
    EXPECT_EQ(t, 1);
    EXPECT_EQ(h % merge, 0);
    EXPECT_EQ(wd % merge, 0);
    EXPECT_GE(h / merge, w.min_side);
    EXPECT_LE(h / merge, w.max_side);
    EXPECT_GE(wd / merge, w.min_side);
    EXPECT_LE(wd / merge, w.max_side);
    patches += t * h * wd;
    blocks.push_back((h / merge) * (wd / merge));
  }
  const auto placeholders = std::count(ids.begin(), ids.end(), w.image_token_id);
  EXPECT_EQ(placeholders * merge * merge, pixels.shape.at(0));
  EXPECT_EQ(patches, pixels.shape.at(0));
  EXPECT_EQ(pixels.shape, (I64{patches, w.pixel_dim}));
  EXPECT_EQ(pixels.type, FieldType::kFloat32);
  // One block of h·w placeholders per image, in grid order: every run of placeholders is made of
  // whole consecutive blocks.
  size_t next_block = 0;
  for (size_t j = 0; j < ids.size();) {
    if (ids[j] != w.image_token_id) {
      EXPECT_GE(ids[j], 1);
      EXPECT_LT(ids[j], w.vocab);
      ++j;
      continue;
    }
    size_t run = 0;
    while (j < ids.size() && ids[j] == w.image_token_id) ++run, ++j;
    int64_t covered = 0;
    while (covered < static_cast<int64_t>(run) && next_block < blocks.size()) {
      covered += blocks[next_block++];
    }
    EXPECT_EQ(covered, static_cast<int64_t>(run)) << "a placeholder run splits an image block";
  }
  EXPECT_EQ(next_block, blocks.size());
  return static_cast<int64_t>(ids.size()) - placeholders;
}

TEST(VlWorkloadSample, PlaceholdersGridAndPixelsAgree) {
  const VisionLanguageWorkload w;  // the default pixel_dim
  const ReorderCost cost = vl_cost(w);
  int64_t min_side = w.max_side;
  int64_t max_side = w.min_side;
  bool non_square = false;
  for (int64_t i = 0; i < 1000; ++i) {
    SCOPED_TRACE("index " + std::to_string(i));
    const MultimodalSample s = vl_sample(w, i);
    EXPECT_EQ(s.id, i);
    EXPECT_NO_THROW(check_vision_fields(s, cost));
    const int64_t text = check_layout(w, s);
    EXPECT_GE(text, 1);
    EXPECT_LE(text, w.max_text_tokens);
    EXPECT_EQ(image_patches(ids_of(s), cost), s.fields.at(kPixelValuesField).shape.at(0));
    const auto g = s.fields.at(kImageGridField).int64_values();
    for (size_t k = 0; k + 2 < g.size(); k += 3) {
      const int64_t h = g[k + 1] / w.spatial_merge_size;
      const int64_t wd = g[k + 2] / w.spatial_merge_size;
      min_side = std::min({min_side, h, wd});
      max_side = std::max({max_side, h, wd});
      non_square = non_square || h != wd;
    }
  }
  // Log-uniform sides reach both ends; height and width are drawn separately.
  EXPECT_EQ(min_side, w.min_side);
  EXPECT_EQ(max_side, w.max_side);
  EXPECT_TRUE(non_square);
}

TEST(VlWorkloadSample, OtherMergeSizeAndImageToken) {
  VisionLanguageWorkload w = light();
  w.spatial_merge_size = 3;
  w.image_token_id = 77777;
  w.text_only_fraction = 0.0;
  const ReorderCost cost = vl_cost(w);
  for (int64_t i = 0; i < 100; ++i) {
    const MultimodalSample s = vl_sample(w, i);
    EXPECT_GE(images_of(s), 1);
    EXPECT_NO_THROW(check_vision_fields(s, cost));
    check_layout(w, s);
  }
}

// ---------------------------------------------------------------------------------------------
// Statistics

TEST(VlWorkloadStats, TextOnlyFraction) {
  for (double fraction : {0.2, 0.5}) {
    VisionLanguageWorkload w = light();
    w.text_only_fraction = fraction;
    int text_only = 0;
    const int n = 4000;
    for (int64_t i = 0; i < n; ++i) {
      const MultimodalSample s = vl_sample(w, i);
      if (images_of(s) == 0) {
        ++text_only;
        EXPECT_EQ(s.fields.at(kPixelValuesField).shape.at(0), 0);
        const I64 ids = ids_of(s);
        EXPECT_EQ(std::count(ids.begin(), ids.end(), w.image_token_id), 0);
      }
    }
    // Binomial standard deviation <= 0.008 at n = 4000: 0.03 is about 4 of them.
    EXPECT_NEAR(static_cast<double>(text_only) / n, fraction, 0.03) << "fraction " << fraction;
  }
  for (double fraction : {0.0, 1.0}) {
    VisionLanguageWorkload w = light();
    w.text_only_fraction = fraction;
    int text_only = 0;
    for (int64_t i = 0; i < 300; ++i) text_only += images_of(vl_sample(w, i)) == 0 ? 1 : 0;
    EXPECT_EQ(text_only, fraction == 0.0 ? 0 : 300);
  }
}

TEST(VlWorkloadStats, ImageCounts) {
  {  // defaults: 1 + geometric with mean 1.5
    const VisionLanguageWorkload w = light();
    int64_t images = 0;
    int64_t bearing = 0;
    int64_t most = 0;
    for (int64_t i = 0; i < 3000; ++i) {
      const int64_t k = images_of(vl_sample(w, i));
      EXPECT_LE(k, w.max_images);
      EXPECT_GE(k, 0);
      if (k > 0) {
        ++bearing;
        images += k;
      }
      most = std::max(most, k);
    }
    ASSERT_GT(bearing, 0);
    EXPECT_NEAR(static_cast<double>(images) / static_cast<double>(bearing), w.mean_images, 0.08);
    EXPECT_GE(most, 3);  // P(k >= 3) = 1/9 per image-bearing sample
  }
  {  // a low cap with a high mean: the cap binds
    VisionLanguageWorkload w = light();
    w.max_images = 3;
    w.mean_images = 4.0;
    w.max_side = 6;
    int64_t at_cap = 0;
    for (int64_t i = 0; i < 1000; ++i) {
      const int64_t k = images_of(vl_sample(w, i));
      EXPECT_LE(k, 3);
      at_cap += k == 3 ? 1 : 0;
    }
    EXPECT_GT(at_cap, 200);
  }
  {  // mean 1: exactly one image per image-bearing sample
    VisionLanguageWorkload w = light();
    w.mean_images = 1.0;
    for (int64_t i = 0; i < 300; ++i) {
      const int64_t k = images_of(vl_sample(w, i));
      EXPECT_TRUE(k == 0 || k == 1) << k;
    }
  }
}

TEST(VlWorkloadStats, HugeMeanImagesReachesTheCap) {
  // With a mean far above max_images nearly every image-bearing sample is clipped to the cap
  // (P(1 + geometric < 8) = 1 - q^7, about 7e-6 at mean 1e6). A setting validate rejects is fine
  // too.
  for (double mean : {1e6, 1e17, 1e300}) {
    std::ostringstream trace;
    trace << "mean_images " << mean;
    SCOPED_TRACE(trace.str());
    VisionLanguageWorkload w = light();
    w.text_only_fraction = 0.0;
    w.mean_images = mean;
    w.max_side = w.min_side;  // small images: this test is about counts
    bool rejected = false;
    try {
      validate(w);
    } catch (const InvalidArgument& e) {
      rejected = true;
      EXPECT_NE(std::string(e.what()).find("mean_images"), std::string::npos) << e.what();
    }
    if (rejected) continue;
    int64_t at_cap = 0;
    for (int64_t i = 0; i < 200; ++i) at_cap += images_of(vl_sample(w, i)) == w.max_images ? 1 : 0;
    EXPECT_EQ(at_cap, 200);
  }
}

TEST(VlWorkloadStats, WideTextSpreadIsClipped) {
  // sigma 50: log-length 5.5 + 50·z. About 48% of the draws lie above max_text_tokens (z > 0.055)
  // and must be clipped to it, about 46% below 1.5 (z < -0.10) and clipped to 1; some of the
  // draws exceed the int64 range (z > 0.76) and must be clipped all the same. A setting validate
  // rejects is fine too.
  VisionLanguageWorkload w = light();
  w.text_only_fraction = 1.0;
  w.text_sigma = 50.0;
  bool rejected = false;
  try {
    validate(w);
  } catch (const InvalidArgument& e) {
    rejected = true;
    EXPECT_NE(std::string(e.what()).find("text_sigma"), std::string::npos) << e.what();
  }
  if (rejected) return;
  const int n = 400;
  int at_max = 0;
  int at_one = 0;
  int outside = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto length = static_cast<int64_t>(ids_of(vl_sample(w, i)).size());
    if (length < 1 || length > w.max_text_tokens) {
      if (++outside <= 3) ADD_FAILURE() << "sample " << i << " has " << length << " text tokens";
    }
    at_max += length == w.max_text_tokens ? 1 : 0;
    at_one += length == 1 ? 1 : 0;
  }
  EXPECT_EQ(outside, 0);
  EXPECT_GT(at_max, n * 40 / 100);
  EXPECT_LT(at_max, n * 56 / 100);
  EXPECT_GT(at_one, n * 38 / 100);
  EXPECT_LT(at_one, n * 54 / 100);
}

TEST(VlWorkloadStats, TextLengthsAreLognormalAroundTheMedian) {
  VisionLanguageWorkload w = light();
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < 2000; ++i) {
    const MultimodalSample s = vl_sample(w, i);
    const I64 ids = ids_of(s);
    lengths.push_back(static_cast<int64_t>(ids.size()) -
                      std::count(ids.begin(), ids.end(), w.image_token_id));
  }
  std::sort(lengths.begin(), lengths.end());
  const double median = static_cast<double>(lengths[lengths.size() / 2]);
  EXPECT_NEAR(median, static_cast<double>(w.median_text_tokens), 0.1 * w.median_text_tokens);
  EXPECT_GE(lengths.front(), 1);
  EXPECT_LE(lengths.back(), w.max_text_tokens);
  // sigma 0.8: the 84th percentile is about e^0.8 = 2.2 times the median.
  const double p84 = static_cast<double>(lengths[lengths.size() * 84 / 100]);
  EXPECT_GT(p84 / median, 1.8);
  EXPECT_LT(p84 / median, 2.7);

  // sigma 0: every sample has the median length; the clip holds.
  w.text_sigma = 0.0;
  w.median_text_tokens = 37;
  for (int64_t i = 0; i < 50; ++i) {
    const I64 ids = ids_of(vl_sample(w, i));
    EXPECT_EQ(
        static_cast<int64_t>(ids.size()) - std::count(ids.begin(), ids.end(), w.image_token_id),
        37);
  }
  w.text_sigma = 3.0;
  w.median_text_tokens = 100;
  w.max_text_tokens = 120;
  for (int64_t i = 0; i < 200; ++i) {
    const I64 ids = ids_of(vl_sample(w, i));
    const auto text =
        static_cast<int64_t>(ids.size()) - std::count(ids.begin(), ids.end(), w.image_token_id);
    EXPECT_GE(text, 1);
    EXPECT_LE(text, 120);
  }
}

}  // namespace
}  // namespace thdpack
