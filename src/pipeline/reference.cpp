// The single-process reference: what every rank must hold after a step, built from whole packs with
// the core packer and CP slicer, independently of the exchange.

#include <string>
#include <unordered_map>

#include "pipeline/pack_segments.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/cp_partition.hpp"
#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack {

std::vector<PackedBatch> reference_microbatches(const GlobalBatch& batch, const Plan& plan,
                                                const std::function<Sample(int64_t)>& sample_of,
                                                const PipelineOptions& options, int rank) {
  const Topology& t = options.topology;
  const Coordinates c = t.coordinates(rank);
  const StageFields fields = stage_fields(options, c.pp);
  const PackOptions pack = pack_options_of(options);
  std::unordered_map<int64_t, int64_t> real_length;
  for (size_t i = 0; i < batch.ids.size(); ++i)
    real_length.emplace(batch.ids[i], batch.real_lengths[i]);

  std::vector<PackedBatch> out;
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    std::vector<Sample> samples;
    for (int64_t id : plan.pack(k, c.dp)) {
      Sample s = sample_of(id);
      if (s.id != id) {
        throw InvalidArgument("sample_of(" + std::to_string(id) + ") returned sample " +
                              std::to_string(s.id));
      }
      samples.push_back(detail::truncated(std::move(s), real_length.at(id)));
    }
    std::vector<SampleView> views;
    for (const Sample& s : samples) views.push_back(view_of(s));
    const PackedBatch whole = pack_samples(views, pack);
    PackedBatch mine = cp_slice(whole.view(), t.cp(), c.cp, options.cp_mode);
    detail::keep_stage_fields(mine, fields);
    out.push_back(std::move(mine));
  }
  return out;
}

}  // namespace thdpack
