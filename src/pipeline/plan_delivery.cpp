// The single-process reference of a plan's delivery (plan_delivery.hpp).

#include "thdpack/pipeline/plan_delivery.hpp"

#include <string>

#include "thdpack/core/errors.hpp"

namespace thdpack {

std::vector<RankMicrobatch> rank_microbatches(const Plan& plan,
                                              const std::function<Sample(int64_t)>& sample_of,
                                              const PackOptions& options, int rank, CpMode mode) {
  check(rank >= 0 && rank < plan.ranks(), "plan delivery: rank ", rank, " is outside the ",
        plan.ranks(), " dp*cp ranks");
  std::vector<RankMicrobatch> out;
  out.reserve(static_cast<size_t>(plan.num_microbatches()));
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    const CpGroupView group = plan.microbatch(k).group_of(rank);
    if (group.size > 1 && options.divisor % (2 * group.size) != 0) {
      fail("plan delivery: padding divisor ", options.divisor, " is not a multiple of 2 x ",
           group.size, " (the CP group of micro-batch ", k, ")");
    }
    std::vector<Sample> samples;
    samples.reserve(group.ids.size());
    for (const int64_t id : group.ids) samples.push_back(sample_of(id));
    std::vector<SampleView> views;
    views.reserve(samples.size());
    for (const auto& s : samples) views.push_back(view_of(s));
    PackedBatch pack = pack_samples(views, options);
    out.push_back({cp_slice(pack.view(), group.size, rank - group.first_rank, mode), group.size,
                   group.first_rank});
  }
  return out;
}

}  // namespace thdpack
