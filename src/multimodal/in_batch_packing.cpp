// In-batch packing of a language shard into one THD row (reorder.hpp).

#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/reorder.hpp"

namespace thdpack {
namespace {

/// The length of `ids` without its trailing pad ids.
size_t trimmed_length(std::span<const int64_t> ids, int64_t pad_id) {
  size_t n = ids.size();
  while (n > 0 && ids[n - 1] == pad_id) --n;
  return n;
}

}  // namespace

PackedBatch pack_language_shard(std::span<const MultimodalSample> shard,
                                const InBatchPackOptions& options) {
  std::vector<SampleView> views;
  views.reserve(shard.size());
  for (const MultimodalSample& sample : shard) {
    const auto ids_it = sample.fields.find(kInputIdsField);
    check(ids_it != sample.fields.end(), "sample ", sample.id, " has no '", kInputIdsField,
          "' to pack");
    const auto ids = ids_it->second.int64_values();
    SampleView view;
    view.id = sample.id;
    view.input_ids = ids.first(trimmed_length(ids, options.pad_id));
    check(!view.input_ids.empty(), "sample ", sample.id, " is all padding (pad id ", options.pad_id,
          "); drop it before packing");
    const auto labels_it = sample.fields.find(kLabelsField);
    if (labels_it != sample.fields.end()) {
      const auto labels = labels_it->second.int64_values();
      check(labels.size() == ids.size(), "sample ", sample.id, " has ", labels.size(),
            " labels for ", ids.size(), " input ids");
      view.labels = labels.first(view.input_ids.size());
    }
    views.push_back(view);
  }
  PackOptions pack;
  pack.divisor = options.divisor;
  pack.pad_id = options.pad_id;
  pack.ignore_id = options.ignore_id;
  return pack_samples(views, pack);
}

}  // namespace thdpack
