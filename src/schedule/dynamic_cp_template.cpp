#include "schedule/dynamic_cp_template.hpp"

#include <algorithm>
#include <bit>
#include <limits>

#include "schedule/dynamic_cp_sizes.hpp"
#include "schedule/length_by_id.hpp"
#include "schedule/length_order.hpp"
#include "schedule/time_cache.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack::detail {

namespace {

/// For each of `leftovers` (their lengths, in order), the template group with the most time to
/// spare for it (its micro-batch's height minus the group's time and its own), among those of a
/// size it may use with token room for it; the first such group on ties; nothing where no group
/// has room (every group full, as when all samples are M·2^j tokens long).
std::vector<std::optional<LeftoverPlace>> place_leftovers(const detail::DraftPlan& tmpl,
                                                          std::span<const int64_t> template_lengths,
                                                          std::span<const int64_t> leftovers,
                                                          const ScheduleOptions& options) {
  struct Slot {
    size_t microbatch, group;
    int size;
    int64_t tokens;
    double spare;  ///< the micro-batch's height minus the group's time
  };
  std::vector<Slot> slots;
  for (size_t t = 0; t < tmpl.microbatches.size(); ++t) {
    const auto& groups = tmpl.microbatches[t].groups;
    const size_t first = slots.size();
    double height = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      Slot slot{t, g, groups[g].size, 0, 0.0};
      double time = 0;
      for (const int64_t block : groups[g].ids) {
        const int64_t length = template_lengths[static_cast<size_t>(block)];
        slot.tokens += length;
        time += options.cost.time(length, slot.size);
      }
      slot.spare = -time;
      height = std::max(height, time);
      slots.push_back(slot);
    }
    for (size_t i = first; i < slots.size(); ++i) slots[i].spare += height;
  }
  std::vector<std::optional<LeftoverPlace>> places;
  std::vector<int> sizes;
  for (const int64_t length : leftovers) {
    candidate_cp_sizes(length, options, sizes);
    const Slot* best = nullptr;
    double best_left = -std::numeric_limits<double>::infinity();
    for (const Slot& slot : slots) {
      if (slot.tokens + length > options.max_seqlen_per_dp_cp_rank * slot.size) continue;
      if (std::find(sizes.begin(), sizes.end(), slot.size) == sizes.end()) continue;
      const double left = slot.spare - options.cost.time(length, slot.size);
      if (left > best_left) {
        best = &slot;
        best_left = left;
      }
    }
    places.push_back(best == nullptr
                         ? std::nullopt
                         : std::optional<LeftoverPlace>({best->microbatch, best->group}));
  }
  return places;
}

/// The height of copy `copy` of template micro-batch t (micro-batch copy·K + t) at
/// [copy·K + t]: each template group's blocks are walked once for all copies; each copy's group
/// times are summed in member order, as modeled_step sums them.
std::vector<double> copy_heights(const detail::DraftPlan& tmpl,
                                 std::span<const int64_t> sorted_lengths, size_t stride,
                                 TimeCache& time) {
  const size_t k = tmpl.microbatches.size();
  std::vector<double> heights(k * stride, 0.0);
  std::vector<double> group_time(stride);
  for (size_t t = 0; t < k; ++t) {
    for (const CpGroup& g : tmpl.microbatches[t].groups) {
      std::fill(group_time.begin(), group_time.end(), 0.0);
      for (const int64_t block : g.ids) {
        const size_t first = static_cast<size_t>(block) * stride;
        for (size_t copy = 0; copy < stride; ++copy) {
          group_time[copy] += time(sorted_lengths[first + copy], g.size);
        }
      }
      for (size_t copy = 0; copy < stride; ++copy) {
        heights[copy * k + t] = std::max(heights[copy * k + t], group_time[copy]);
      }
    }
  }
  return heights;
}

/// Leftover `copy` joins its group last: that micro-batch's height summed again.
double height_with_leftover(const detail::DraftPlan& tmpl, const LeftoverPlace& place,
                            std::span<const int64_t> sorted_lengths, size_t stride, size_t copy,
                            int64_t leftover_length, TimeCache& time) {
  const auto& groups = tmpl.microbatches[place.microbatch].groups;
  double height = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    double t = 0;
    for (const int64_t block : groups[g].ids) {
      t += time(sorted_lengths[static_cast<size_t>(block) * stride + copy], groups[g].size);
    }
    if (g == place.group) t += time(leftover_length, groups[g].size);
    height = std::max(height, t);
  }
  return height;
}

}  // namespace

std::optional<TemplatePlan> plan_by_template(const LengthGroups& by_length,
                                             const ScheduleOptions& options,
                                             int64_t template_samples,
                                             const DynamicCpPlanner& plan_template) {
  const auto n = static_cast<int64_t>(by_length.ids.size());
  if (template_samples < 1 || n < 2 * template_samples ||
      !std::has_single_bit(static_cast<unsigned>(options.min_cp))) {
    return std::nullopt;
  }
  // Ids and lengths by length, longest first: a block's samples lie together.
  std::vector<int64_t> sorted_lengths(by_length.ids.size());
  for (size_t g = 0; g < by_length.lengths.size(); ++g) {
    std::fill(sorted_lengths.begin() + static_cast<std::ptrdiff_t>(by_length.starts[g]),
              sorted_lengths.begin() + static_cast<std::ptrdiff_t>(by_length.starts[g + 1]),
              by_length.lengths[g]);
  }
  const std::vector<int64_t>& sorted_ids = by_length.ids;
  TemplatePlan out;
  const auto stride = static_cast<size_t>(n / template_samples);
  out.stride_ = stride;
  const size_t blocks = static_cast<size_t>(n) / stride;
  std::vector<int64_t> template_ids(blocks);
  std::vector<int64_t> template_lengths(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    template_ids[b] = static_cast<int64_t>(b);
    template_lengths[b] = sorted_lengths[b * stride];
  }
  out.template_ = plan_template(template_ids, template_lengths, options);
  const detail::DraftPlan& tmpl = out.template_;
  const size_t past_blocks = blocks * stride;
  // Fewer than `stride` samples: leftover j joins copy j <= stride - 2, so a plan that replaces
  // the last copy (below) never holds one.
  const auto leftovers = std::span<const int64_t>(sorted_lengths).subspan(past_blocks);
  out.places_ = place_leftovers(tmpl, template_lengths, leftovers, options);

  const size_t k = tmpl.microbatches.size();
  TimeCache time(options.cost);
  std::vector<double> heights = copy_heights(tmpl, sorted_lengths, stride, time);
  std::vector<int64_t> unplaced_ids;
  std::vector<int64_t> unplaced_lengths;
  for (size_t copy = 0; copy < leftovers.size(); ++copy) {
    if (const auto& place = out.places_[copy]) {
      heights[copy * k + place->microbatch] =
          height_with_leftover(tmpl, *place, sorted_lengths, stride, copy, leftovers[copy], time);
    } else {
      unplaced_ids.push_back(sorted_ids[past_blocks + copy]);
      unplaced_lengths.push_back(leftovers[copy]);
    }
  }
  out.copies_ = stride;
  if (!unplaced_ids.empty()) {
    // No group had room for these: they get micro-batches of their own (a VPP multiple of them,
    // planned as a batch of their own), after the copies.
    try {
      out.extra_ = plan_template(unplaced_ids, unplaced_lengths, options);
    } catch (const InvalidArgument&) {
      // Too few for a VPP multiple of micro-batches: they are planned with the last copy's
      // samples (a batch like the template's), whose micro-batches that plan replaces.
      for (size_t b = 0; b < blocks; ++b) {
        unplaced_ids.push_back(sorted_ids[b * stride + stride - 1]);
        unplaced_lengths.push_back(sorted_lengths[b * stride + stride - 1]);
      }
      out.extra_ = plan_template(unplaced_ids, unplaced_lengths, options);
      out.copies_ = stride - 1;
      heights.resize(out.copies_ * k);
    }
    const LengthById length_of(unplaced_ids, unplaced_lengths);
    for (const detail::DraftMicrobatch& mb : out.extra_.microbatches) {
      heights.push_back(microbatch_height(mb.groups, length_of, time));
    }
  }
  for (const double h : heights) out.step_ += h;
  return out;
}

detail::DraftPlan TemplatePlan::build(const LengthGroups& by_length) const {
  const std::vector<int64_t>& sorted_ids = by_length.ids;
  const size_t k = template_.microbatches.size();
  const size_t stride = stride_;
  detail::DraftPlan plan;
  plan.ranks = template_.ranks;
  plan.microbatches.resize(k * copies_);
  std::vector<std::vector<int64_t>*> targets(copies_);
  for (size_t t = 0; t < k; ++t) {
    const auto& groups = template_.microbatches[t].groups;
    for (size_t copy = 0; copy < copies_; ++copy) {
      auto& out = plan.microbatches[copy * k + t].groups;
      out.reserve(groups.size());
      for (const CpGroup& g : groups) out.push_back(CpGroup{g.first_rank, g.size, {}});
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t copy = 0; copy < copies_; ++copy) {
        targets[copy] = &plan.microbatches[copy * k + t].groups[g].ids;
        targets[copy]->reserve(groups[g].ids.size() + 1);
      }
      for (const int64_t block : groups[g].ids) {
        const size_t first = static_cast<size_t>(block) * stride;
        for (size_t copy = 0; copy < copies_; ++copy) {
          targets[copy]->push_back(sorted_ids[first + copy]);
        }
      }
    }
  }
  const size_t past_blocks = sorted_ids.size() / stride * stride;
  for (size_t copy = 0; copy < places_.size(); ++copy) {
    if (const auto& place = places_[copy]) {
      plan.microbatches[copy * k + place->microbatch].groups[place->group].ids.push_back(
          sorted_ids[past_blocks + copy]);
    }
  }
  plan.microbatches.insert(plan.microbatches.end(), extra_.microbatches.begin(),
                           extra_.microbatches.end());
  return plan;
}

}  // namespace thdpack::detail
