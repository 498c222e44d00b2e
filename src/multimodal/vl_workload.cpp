// The synthetic vision-language workload (vl_workload.hpp).

#include "thdpack/multimodal/vl_workload.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/counter_rng.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

// Independent random streams of one sample.
enum Stream : uint64_t {
  kTextOnly = 1,
  kImageCount,
  kTextLength1,
  kTextLength2,
  kImageSide,  // two per image (height, width), from this stream on
};

template <class... Rule>
void require(bool ok, const char* key, const Rule&... rule) {
  check(ok, "vision-language workload: ", key, " ", rule...);
}

double uniform(const VisionLanguageWorkload& w, int64_t index, uint64_t stream) {
  return detail::counter_uniform(w.seed, static_cast<uint64_t>(index), stream);
}

int64_t image_count(const VisionLanguageWorkload& w, int64_t index) {
  if (uniform(w, index, kTextOnly) < w.text_only_fraction) return 0;
  // 1 + geometric(q) with mean 1 + q / (1 - q) = mean_images.
  const double q = (w.mean_images - 1.0) / w.mean_images;
  // A mean so large that q rounds to 1 means "always the cap" (log q would be 0).
  const double max_extra = static_cast<double>(w.max_images - 1);
  double extra = 0;
  if (q >= 1) {
    extra = max_extra;
  } else if (q > 0) {
    extra = std::floor(std::log(uniform(w, index, kImageCount)) / std::log(q));
  }
  return 1 + static_cast<int64_t>(std::clamp(extra, 0.0, max_extra));
}

int64_t image_side(const VisionLanguageWorkload& w, int64_t index, uint64_t stream) {
  const double lo = std::log(static_cast<double>(w.min_side));
  const double hi = std::log(static_cast<double>(w.max_side));
  const double side = std::exp(lo + uniform(w, index, stream) * (hi - lo));
  return std::clamp<int64_t>(std::llround(side), w.min_side, w.max_side);
}

int64_t text_tokens(const VisionLanguageWorkload& w, int64_t index) {
  const double u1 = uniform(w, index, kTextLength1);
  const double u2 = uniform(w, index, kTextLength2);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  const double x = std::exp(std::log(static_cast<double>(w.median_text_tokens)) + w.text_sigma * z);
  // Clamped as a double: a draw beyond the int64 range must not reach llround.
  return std::llround(std::clamp(x, 1.0, static_cast<double>(w.max_text_tokens)));
}

}  // namespace

void validate(const VisionLanguageWorkload& w) {
  require(w.text_only_fraction >= 0 && w.text_only_fraction <= 1, "text_only_fraction",
          "must be in [0, 1], got ", std::to_string(w.text_only_fraction));
  require(std::isfinite(w.mean_images) && w.mean_images >= 1, "mean_images", "must be >= 1, got ",
          std::to_string(w.mean_images));
  require(w.max_images >= 1, "max_images", "must be >= 1, got ", w.max_images);
  require(w.min_side >= 1 && w.min_side <= w.max_side, "min_side", "must be in [1, max_side], got ",
          w.min_side, " with max_side ", w.max_side);
  require(w.max_side <= 4096, "max_side", "must be <= 4096, got ", w.max_side);
  require(w.median_text_tokens >= 1 && w.median_text_tokens <= w.max_text_tokens,
          "median_text_tokens", "must be in [1, max_text_tokens], got ", w.median_text_tokens);
  require(std::isfinite(w.text_sigma) && w.text_sigma >= 0, "text_sigma",
          "must be finite and >= 0, got ", std::to_string(w.text_sigma));
  require(w.pixel_dim >= 1, "pixel_dim", "must be >= 1, got ", w.pixel_dim);
  require(w.spatial_merge_size >= 1 && w.spatial_merge_size <= 64, "spatial_merge_size",
          "must be in [1, 64], got ", w.spatial_merge_size);
  require(w.vocab >= 2, "vocab", "must be >= 2, got ", w.vocab);
  require(w.image_token_id < 0 || w.image_token_id >= w.vocab, "image_token_id",
          "must lie outside the text ids [0, vocab), got ", w.image_token_id);
}

MultimodalSample vl_sample(const VisionLanguageWorkload& w, int64_t index) {
  validate(w);
  const int64_t images = image_count(w, index);
  const int64_t text = text_tokens(w, index);
  const int64_t merge2 = w.spatial_merge_size * w.spatial_merge_size;

  std::vector<int64_t> grid;
  std::vector<int64_t> placeholders;  // merged tokens per image
  for (int64_t i = 0; i < images; ++i) {
    const int64_t h = image_side(w, index, kImageSide + 2 * static_cast<uint64_t>(i));
    const int64_t wd = image_side(w, index, kImageSide + 2 * static_cast<uint64_t>(i) + 1);
    grid.insert(grid.end(), {1, h * w.spatial_merge_size, wd * w.spatial_merge_size});
    placeholders.push_back(h * wd);
  }
  // Text split into images + 1 chunks around the image blocks, as in a chat with images.
  std::vector<int64_t> ids;
  int64_t written_text = 0;
  const uint64_t text_seed = detail::mix64(w.seed ^ static_cast<uint64_t>(index));
  auto write_text = [&](int64_t count) {
    for (int64_t j = 0; j < count; ++j, ++written_text) {
      const uint64_t bits = detail::mix64(text_seed + static_cast<uint64_t>(written_text));
      ids.push_back(1 + static_cast<int64_t>(bits % static_cast<uint64_t>(w.vocab - 1)));
    }
  };
  int64_t patches = 0;
  for (int64_t i = 0; i < images; ++i) {
    write_text(text * (i + 1) / (images + 1) - written_text);
    ids.insert(ids.end(), static_cast<size_t>(placeholders[static_cast<size_t>(i)]),
               w.image_token_id);
    patches += placeholders[static_cast<size_t>(i)] * merge2;
  }
  write_text(text - written_text);

  std::vector<float> pixels(static_cast<size_t>(patches * w.pixel_dim));
  for (int64_t row = 0; row < patches; ++row) {
    const uint64_t bits =
        detail::mix64((static_cast<uint64_t>(index) << 32) ^ static_cast<uint64_t>(row) ^ w.seed);
    for (int64_t col = 0; col < w.pixel_dim; ++col) {
      pixels[static_cast<size_t>(row * w.pixel_dim + col)] =
          static_cast<float>((bits >> (col % 48)) & 0xFFFF) / 65536.0f;
    }
  }

  MultimodalSample s;
  s.id = index;
  s.fields.emplace(kInputIdsField, SampleField::of_int64(ids));
  SampleField grid_field = SampleField::of_int64(grid);
  grid_field.shape = {images, 3};
  s.fields.emplace(kImageGridField, std::move(grid_field));
  s.fields.emplace(kPixelValuesField, SampleField::of_float32(pixels, {patches, w.pixel_dim}));
  return s;
}

SampleSchema vl_schema() {
  return make_schema({{kImageGridField, FieldType::kInt64, 2},
                      {kInputIdsField, FieldType::kInt64, 1},
                      {kPixelValuesField, FieldType::kFloat32, 2}});
}

ReorderCost vl_cost(const VisionLanguageWorkload& w, double vision_weight, double text_weight) {
  ReorderCost c;
  c.vision_weight = vision_weight;
  c.text_weight = text_weight;
  c.image_token_id = w.image_token_id;
  c.spatial_merge_size = w.spatial_merge_size;
  c.pad_id = 0;
  return c;
}

}  // namespace thdpack
