// The single-process reference: what every rank must hold after a step, built from whole packs with
// the core packer and CP slicer (rank_microbatches), independently of the exchange.

#include <string>
#include <unordered_map>

#include "pipeline/pack_segments.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/pipeline/plan_delivery.hpp"

namespace thdpack {

std::vector<PackedBatch> reference_microbatches(const GlobalBatch& batch, const Plan& plan,
                                                const std::function<Sample(int64_t)>& sample_of,
                                                const PipelineOptions& options, int rank) {
  const Topology& t = options.topology;
  const Coordinates c = t.coordinates(rank);
  std::unordered_map<int64_t, int64_t> real_length;
  for (size_t i = 0; i < batch.ids.size(); ++i) {
    real_length.emplace(batch.ids[i], batch.real_lengths[i]);
  }
  auto gathered = [&](int64_t id) {
    Sample s = sample_of(id);
    check(s.id == id, "sample_of(", id, ") returned sample ", s.id);
    return detail::truncated(std::move(s), real_length.at(id));
  };
  std::vector<PackedBatch> out;
  for (RankMicrobatch& m : rank_microbatches(plan, gathered, pack_options_of(options),
                                             c.dp * t.cp() + c.cp, options.cp_mode)) {
    detail::keep_stage_fields(m.pack, stage_fields(options, c.pp));
    out.push_back(std::move(m.pack));
  }
  return out;
}

}  // namespace thdpack
