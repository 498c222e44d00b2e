#pragma once
// A plan under construction by the dynamic-CP schedulers: micro-batches they reorder, split and
// regroup as vectors of owning groups, turned into the flat Plan (plan.hpp) once, when returned.

#include <cstdint>
#include <vector>

#include "thdpack/schedule/plan.hpp"

namespace thdpack::detail {

/// The groups of one micro-batch, in rank order.
struct DraftMicrobatch {
  std::vector<CpGroup> groups;
};

/// Micro-batches over `ranks` = dp·cp ranks.
struct DraftPlan {
  int ranks = 1;
  std::vector<DraftMicrobatch> microbatches;

  int64_t num_microbatches() const { return static_cast<int64_t>(microbatches.size()); }
};

/// The finished plan over the dp×cp group (dp·cp must be draft.ranks).
Plan to_plan(const DraftPlan& draft, int dp, int cp);
/// A finished plan as a draft again (a template planned by a public scheduler).
DraftPlan to_draft(const Plan& plan);

}  // namespace thdpack::detail
