// The per-sample cost of multimodal reordering and the vision-data consistency check (reorder.hpp).

#include <algorithm>
#include <cmath>
#include <sstream>

#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/reorder.hpp"

namespace thdpack {
namespace {

void check_weight(double weight, const char* name) {
  if (!std::isfinite(weight) || weight < 0) {
    std::ostringstream out;
    out << name << " is " << (std::isfinite(weight) ? "negative" : "not finite") << " (" << weight
        << "); cost weights must be finite and >= 0";
    throw InvalidArgument(out.str());
  }
}

std::string sample_label(const MultimodalSample& sample) {
  return message("sample ", sample.id);
}

}  // namespace

void validate(const ReorderCost& cost, bool reordering) {
  check_weight(cost.vision_weight, "the vision weight");
  check_weight(cost.text_weight, "the text weight");
  check(cost.spatial_merge_size >= 1, "spatial_merge_size must be >= 1, got ",
        cost.spatial_merge_size);
  if (reordering && cost.vision_weight == 0 && cost.text_weight == 0) {
    throw InvalidArgument(
        "the vision and text weights are both zero, so every sample costs 0 and reordering has "
        "nothing to balance; give one a positive weight or turn reordering off");
  }
}

int64_t image_patches(std::span<const int64_t> input_ids, const ReorderCost& cost) {
  const auto placeholders = std::count(input_ids.begin(), input_ids.end(), cost.image_token_id);
  return static_cast<int64_t>(placeholders) * cost.spatial_merge_size * cost.spatial_merge_size;
}

int64_t real_tokens(std::span<const int64_t> input_ids, const ReorderCost& cost) {
  const auto pads = std::count(input_ids.begin(), input_ids.end(), cost.pad_id);
  return static_cast<int64_t>(input_ids.size()) - static_cast<int64_t>(pads);
}

double sample_cost(std::span<const int64_t> input_ids, const ReorderCost& cost) {
  double c = 0;
  if (cost.vision_weight != 0) {
    c += cost.vision_weight * static_cast<double>(image_patches(input_ids, cost));
  }
  if (cost.text_weight != 0) {
    c += cost.text_weight * static_cast<double>(real_tokens(input_ids, cost));
  }
  return c;
}

void check_vision_fields(const MultimodalSample& sample, const ReorderCost& cost) {
  const auto ids_it = sample.fields.find(kInputIdsField);
  if (ids_it == sample.fields.end()) {
    fail(sample_label(sample), " has no '", kInputIdsField, "'");
  }
  const int64_t patches = image_patches(ids_it->second.int64_values(), cost);
  const int64_t per_token = cost.spatial_merge_size * cost.spatial_merge_size;

  const auto grid_it = sample.fields.find(kImageGridField);
  if (grid_it != sample.fields.end()) {
    const SampleField& grid = grid_it->second;
    if (grid.type != FieldType::kInt64 || grid.shape.size() != 2 || grid.shape[1] != 3) {
      fail(sample_label(sample), ": '", kImageGridField, "' must be int64 of shape [images, 3]");
    }
    const auto values = grid.int64_values();
    const int64_t images = grid.shape[0];
    int64_t grid_patches = 0;
    for (int64_t i = 0; i < images; ++i) {
      const int64_t t = values[static_cast<size_t>(3 * i)];
      const int64_t h = values[static_cast<size_t>(3 * i + 1)];
      const int64_t w = values[static_cast<size_t>(3 * i + 2)];
      if (t < 1 || h < 1 || w < 1) {
        fail(sample_label(sample), ": image ", i, " has grid (t, h, w) = (", t, ", ", h, ", ", w,
             "); every value must be >= 1");
      }
      // Each factor within 2^20 and the product within 2^40, so nothing below overflows.
      constexpr int64_t kMaxSide = int64_t{1} << 20;
      if (h > kMaxSide || w > kMaxSide || t > kMaxSide || t * h > (int64_t{1} << 40) / w) {
        fail(sample_label(sample), ": image ", i, " has an implausibly large grid");
      }
      grid_patches += t * h * w;
      if (grid_patches > patches) break;  // already a mismatch; stop before the sum can overflow
    }
    if (grid_patches != patches) {
      fail(sample_label(sample), " has ", images, " image(s) whose ", kImageGridField, " sums to ",
           grid_patches > patches ? "at least " : "", grid_patches, " patches, but its ",
           patches / per_token, " image placeholder tokens (id ", cost.image_token_id, ") make ",
           patches, " patches at spatial_merge_size ", cost.spatial_merge_size);
    }
  }
  const auto pixels_it = sample.fields.find(kPixelValuesField);
  if (pixels_it != sample.fields.end()) {
    const SampleField& pixels = pixels_it->second;
    const int64_t rows = pixels.shape.empty() ? -1 : pixels.shape[0];
    if (rows != patches) {
      const int64_t images = grid_it == sample.fields.end() ? -1 : grid_it->second.shape.at(0);
      fail(sample_label(sample), " has ", images < 0 ? std::string("its") : std::to_string(images),
           " image(s) with ", rows, " rows of ", kPixelValuesField, ", but its ",
           patches / per_token, " image placeholder tokens make ", patches, " patches");
    }
  }
}

}  // namespace thdpack
