#pragma once
// Dynamic-CP plans of very large batches from the plan of a stride sample (a template).
//
// The samples are ordered by padded length, longest first, and cut into blocks of `s`
// consecutive samples. The template is a plan of the blocks' longest samples; the batch's plan
// holds s copies of it, copy j putting each block's j-th sample where the template put the
// block's first. A sample is never longer than its block's first, so in every copy a group's
// tokens stay within the template's, the sample may use the group's size (when min_cp is a power
// of two, a shorter sample's allowed sizes include a longer one's), and under any CostModel
// (time grows with length at a fixed size) no group takes longer than in the template. Every
// contract of a dynamic-CP plan thus carries over, with s·K micro-batches (a VPP multiple when K
// is). The fewer than s samples past the last full block are the shortest; each goes to its own
// copy, into the template group with the most time to spare for it; those no group has token
// room for (every group full) are planned as a batch of their own, whose micro-batches follow;
// where they are too few for a VPP multiple of micro-batches, that batch also takes the last
// copy's samples, and its plan replaces the last copy.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "schedule/dynamic_cp_step.hpp"
#include "schedule/length_order.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack::detail {

using DynamicCpPlanner = std::function<detail::DraftPlan(std::span<const int64_t> ids,
                                                         std::span<const int64_t> padded_lengths,
                                                         const ScheduleOptions& options)>;

/// Where a sample past the last full block goes: leftover j joins copy j of template group
/// `group` of micro-batch `microbatch`.
struct LeftoverPlace {
  size_t microbatch;
  size_t group;
};

/// A batch's plan by template (see above) and its modeled step, built on demand: a planner that
/// keeps the faster of two plans of a million samples builds (and frees) only the one it keeps.
class TemplatePlan {
 public:
  /// The plan's modeled step under options.cost, bit-identical to modeled_step of build().
  double step() const { return step_; }
  /// The plan; `by_length` is the one given to plan_by_template.
  detail::DraftPlan build(const LengthGroups& by_length) const;

 private:
  friend std::optional<TemplatePlan> plan_by_template(const LengthGroups&, const ScheduleOptions&,
                                                      int64_t, const DynamicCpPlanner&);
  detail::DraftPlan template_;
  size_t stride_ = 0;  ///< samples per block
  size_t copies_ = 0;  ///< copies of the template: stride_, or stride_ - 1 (see extra_)
  std::vector<std::optional<LeftoverPlace>> places_;  ///< one per sample past the blocks
  /// The plan of the leftovers no group had room for: alone, or where they are too few for a VPP
  /// multiple of micro-batches, with the last copy's samples (then not a copy).
  detail::DraftPlan extra_;
  double step_ = 0;
};

/// The plan of the whole batch from `plan_template`'s plan of a sample of about
/// `template_samples` samples (see above). Empty when the batch is under twice that or min_cp is
/// not a power of two. `by_length` is group_by_length of the input. Throws what `plan_template`
/// throws. Input must have passed validate_dynamic_cp_input.
std::optional<TemplatePlan> plan_by_template(const LengthGroups& by_length,
                                             const ScheduleOptions& options,
                                             int64_t template_samples,
                                             const DynamicCpPlanner& plan_template);

}  // namespace thdpack::detail
