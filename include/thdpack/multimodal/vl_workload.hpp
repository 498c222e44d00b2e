#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// A synthetic vision-language workload for the reordering benchmark, CLI and tests: samples with a
// seeded, variable number of images (text-only samples included) whose sizes vary widely, laid
// out like Qwen-VL inputs. Sample i depends only on (config, i), so every rank can read exactly
// its own shard.

#include <cstdint>

#include "thdpack/multimodal/reorder.hpp"

namespace thdpack {

struct VisionLanguageWorkload {
  uint64_t seed = 1234;
  double text_only_fraction = 0.2;  ///< samples without images
  double mean_images = 1.5;         ///< images per image-bearing sample: 1 + geometric, this mean
  int64_t max_images = 8;
  /// Image side in merged tokens (each token covers spatial_merge_size² patches), log-uniform in
  /// [min_side, max_side]; height and width drawn separately.
  int64_t min_side = 4;
  int64_t max_side = 32;
  /// Text tokens per sample: lognormal with this median, clipped to [1, max_text_tokens].
  int64_t median_text_tokens = 256;
  double text_sigma = 0.8;
  int64_t max_text_tokens = 4096;
  int64_t pixel_dim = 64;  ///< float32 values per patch row of pixel_values
  int64_t image_token_id = 151655;
  int64_t spatial_merge_size = 2;
  int64_t vocab = 32000;  ///< text token ids in [1, vocab); 0 is padding
};

/// InvalidArgument for out-of-range settings, naming the key.
void validate(const VisionLanguageWorkload& workload);

/// Sample `index`: input_ids (text with one block of placeholders per image, each block
/// h·w tokens), pixel_values float32 [patches, pixel_dim] with patches = Σ h·w·merge², and
/// image_grid_thw int64 [images, 3] = (1, h·merge, w·merge). Its id is `index`.
MultimodalSample vl_sample(const VisionLanguageWorkload& workload, int64_t index);

/// The schema of every vl_sample (image_grid_thw, input_ids, pixel_values).
SampleSchema vl_schema();

/// The cost settings matching the workload (its image token and merge size; vision weight 1,
/// text weight 0 unless given).
ReorderCost vl_cost(const VisionLanguageWorkload& workload, double vision_weight = 1.0,
                    double text_weight = 0.0);

}  // namespace thdpack
