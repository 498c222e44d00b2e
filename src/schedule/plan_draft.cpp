#include "schedule/plan_draft.hpp"

#include <string>

#include "thdpack/core/errors.hpp"

namespace thdpack::detail {

Plan to_plan(const DraftPlan& draft, int dp, int cp) {
  Plan plan(dp, cp);
  check<InternalError>(plan.ranks() == draft.ranks, "plan draft over ", draft.ranks,
                       " ranks, expected dp*cp = ", plan.ranks());
  int64_t groups = 0;
  int64_t ids = 0;
  for (const DraftMicrobatch& mb : draft.microbatches) {
    groups += static_cast<int64_t>(mb.groups.size());
    for (const CpGroup& g : mb.groups) ids += static_cast<int64_t>(g.ids.size());
  }
  plan.reserve(draft.num_microbatches(), groups, ids);
  for (const DraftMicrobatch& mb : draft.microbatches) {
    plan.begin_microbatch();
    for (const CpGroup& g : mb.groups) plan.add_group(g);
  }
  return plan;
}

DraftPlan to_draft(const Plan& plan) {
  DraftPlan draft;
  draft.ranks = plan.ranks();
  draft.microbatches.reserve(static_cast<size_t>(plan.num_microbatches()));
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    draft.microbatches.push_back({plan.microbatch(k).groups()});
  }
  return draft;
}

}  // namespace thdpack::detail
