// The single-process reference of dynamic-CP delivery (dynamic_cp_delivery.hpp).

#include "thdpack/pipeline/dynamic_cp_delivery.hpp"

#include <string>

#include "thdpack/core/errors.hpp"
#include "thdpack/packing/cp_partition.hpp"

namespace thdpack {

std::vector<DynamicCpRankMicrobatch> dynamic_cp_rank_microbatches(
    const DynamicCpPlan& plan, const std::function<Sample(int64_t)>& sample_of,
    const PackOptions& options, int rank) {
  if (rank < 0 || rank >= plan.ranks) {
    throw InvalidArgument("dynamic CP delivery: rank " + std::to_string(rank) + " is outside the " +
                          std::to_string(plan.ranks) + " dp*cp ranks");
  }
  PackOptions whole = options;
  whole.capacity = 0;
  std::vector<DynamicCpRankMicrobatch> out;
  out.reserve(plan.microbatches.size());
  for (const auto& mb : plan.microbatches) {
    const CpGroup& group = mb.group_of(rank);
    if (group.size > 1 && options.divisor % (2 * group.size) != 0) {
      throw InvalidArgument("dynamic CP delivery: padding divisor " +
                            std::to_string(options.divisor) + " is not a multiple of 2 x " +
                            std::to_string(group.size) + "; pad with 2*dp*cp");
    }
    std::vector<Sample> samples;
    samples.reserve(group.ids.size());
    for (const int64_t id : group.ids) samples.push_back(sample_of(id));
    std::vector<SampleView> views;
    views.reserve(samples.size());
    for (const auto& s : samples) views.push_back(view_of(s));
    const PackedBatch pack = pack_samples(views, whole);
    out.push_back(
        {group.size > 1 ? cp_slice(pack.view(), group.size, rank - group.first_rank) : pack,
         group.size, group.first_rank});
  }
  return out;
}

}  // namespace thdpack
