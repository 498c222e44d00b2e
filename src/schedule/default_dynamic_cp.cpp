// "default_dynamic_cp": Megatron-LM's packing-aware dynamic CP scheduler, reproduced exactly
// (SPEC §5; rules, ties and orders in docs/schedulers.md).
//
// Groups are kept in rank order: a new group always takes the lowest free ranks, and doubling a
// group shifts the later ones right, so creation order is rank order and every group is a
// contiguous range. All members of a group carry the same load, so the projected maximum rank
// load of a placement is max(current maximum, group load + L²/c) and costs O(1).
// Samples wait in classes of equal length (longest first, ids ascending): a sample that cannot be
// placed leaves the round's state as it was, so every later sample of its length waits too, and a
// round visits each class once instead of every waiting sample (Megatron's rounds each scan all
// waiting samples: quadratic in the batch).
// Workloads are doubles computed as Megatron computes them ((L·L)/c, cap = L·M·(1 + 0.05)), so
// ties resolve identically; token budgets are exact integers (Megatron uses floats).

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "schedule/dynamic_cp_step.hpp"
#include "schedule/group_fit_tree.hpp"
#include "schedule/time_cache.hpp"
#include "schedule/waiting_samples.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/oversize_fix.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

namespace {

constexpr double kWorkloadCapDelta = 0.05;

struct RoundGroup {
  int size;
  int64_t tokens;
  double load;
  size_t members;
};

/// A sample a round placed: its group (index into the round's groups), id and length, in
/// placement order.
struct Placed {
  int group;
  int64_t id;
  int64_t length;
};

double workload(int64_t length, int cp) {
  return static_cast<double>(length) * static_cast<double>(length) / static_cast<double>(cp);
}

/// The groups of one size in creation order (indexes into the round's groups), and their rooms
/// and loads in a GroupFitTree at the same positions.
struct SizeIndex {
  int size;
  std::vector<int> groups;
  detail::GroupFitTree tree;
};

/// The index of `size` in `indexes` (a handful of sizes), or nullptr.
SizeIndex* find_size(std::vector<SizeIndex>& indexes, int size) {
  for (auto& x : indexes) {
    if (x.size == size) return &x;
  }
  return nullptr;
}

/// A bound on the rounding of one double addition of x and y: candidates the tree finds with a
/// limit widened by it are then checked with the exact expression Megatron evaluates.
double rounding_slack(double x, double y) {
  return 0x1p-50 * (std::abs(x) + std::abs(y));
}

/// Within one size: the first group (creation order) with room for `length` whose score
/// max(max_load, load + w) is the least any such group has, and that score; npos when no group of
/// the size has room.
std::pair<size_t, double> best_of_size(const detail::GroupFitTree& tree, int64_t length, double w,
                                       double max_load) {
  if (tree.most_room() < length) return {detail::GroupFitTree::npos, 0.0};
  // Most often some group stays within the current maximum: the least score, max_load.
  const double within = max_load - w + rounding_slack(max_load, w);
  for (size_t i = tree.first_fit(0, length, within); i != detail::GroupFitTree::npos;
       i = tree.first_fit(i + 1, length, within)) {
    if (tree.load(i) + w <= max_load) return {i, max_load};
  }
  // Otherwise the least load gives the least score; the first group that reaches it.
  const double least = tree.least_load(length);
  const double score = least + w;
  const double near = least + rounding_slack(least, w);
  for (size_t i = tree.first_fit(0, length, near); i != detail::GroupFitTree::npos;
       i = tree.first_fit(i + 1, length, near)) {
    if (tree.load(i) + w == score) return {i, score};
  }
  return {detail::GroupFitTree::npos, 0.0};  // not reached: the least load is some group's
}

/// Lays the groups out from rank 0 in order, each with its samples in placement order (one
/// allocation per group: a large batch forms hundreds of thousands). With `time`, `height` is the
/// micro-batch's modeled height (its slowest group's summed times, in member order).
detail::DraftMicrobatch lay_out(const std::vector<RoundGroup>& groups,
                                const std::vector<Placed>& placed, detail::TimeCache* time,
                                double& height) {
  detail::DraftMicrobatch mb;
  mb.groups.reserve(groups.size());
  int rank = 0;
  for (const auto& g : groups) {
    mb.groups.push_back(CpGroup{rank, g.size, {}});
    mb.groups.back().ids.reserve(g.members);
    rank += g.size;
  }
  for (const Placed& p : placed) mb.groups[static_cast<size_t>(p.group)].ids.push_back(p.id);
  if (time != nullptr) {
    std::vector<double> times(groups.size(), 0.0);
    for (const Placed& p : placed) {
      times[static_cast<size_t>(p.group)] +=
          (*time)(p.length, groups[static_cast<size_t>(p.group)].size);
    }
    height = 0;
    for (const double t : times) height = std::max(height, t);
  }
  return mb;
}

/// A class a round took samples from, and its first waiting sample before the round.
struct Touched {
  size_t cls;
  size_t next;
};

/// Whole-group fallback: first-fit of the round's samples (descending) onto all G ranks. A
/// class's samples fit up to the first that does not; then only a class no longer than the room
/// left can fit, so the others are skipped.
detail::DraftMicrobatch fill_whole_group(detail::WaitingSamples& waiting, int ranks, int64_t m,
                                         std::vector<Touched>& touched, detail::TimeCache* time,
                                         double& height) {
  touched.clear();
  CpGroup all{0, ranks, {}};
  int64_t room = m * ranks;
  height = 0;
  for (size_t c = waiting.open_from(0); c < waiting.size();
       c = waiting.open_from(waiting.first_at_most(c + 1, room))) {
    detail::LengthClass& cls = waiting[c];
    const size_t take = std::min(static_cast<size_t>(room / cls.length), cls.waiting());
    if (take == 0) continue;
    touched.push_back({c, cls.next});
    const auto from = waiting.ids().begin() + static_cast<std::ptrdiff_t>(cls.next);
    all.ids.insert(all.ids.end(), from, from + static_cast<std::ptrdiff_t>(take));
    cls.next += take;
    room -= static_cast<int64_t>(take) * cls.length;
    if (time != nullptr) {
      const double each = (*time)(cls.length, ranks);
      for (size_t i = 0; i < take; ++i) height += each;  // one by one, as a plan's step sums
    }
  }
  detail::DraftMicrobatch mb;
  mb.groups.push_back(std::move(all));
  return mb;
}

/// One scheduling round: the micro-batch it forms from the waiting samples; placed samples leave
/// them (empty classes are closed). `touched` and `by_size` are scratch kept between rounds. With
/// `time`, `height` is the micro-batch's modeled height.
detail::DraftMicrobatch next_microbatch(detail::WaitingSamples& waiting, const DynamicCpOptions& o,
                                        std::vector<Touched>& touched,
                                        std::vector<SizeIndex>& by_size, detail::TimeCache* time,
                                        double& height) {
  const int ranks = o.ranks();
  const int64_t m = o.max_seqlen_per_dp_cp_rank;
  touched.clear();
  const size_t first_class = waiting.open_from(0);
  detail::LengthClass& first = waiting[first_class];
  touched.push_back({first_class, first.next});
  const int first_cp = first.cp_min;
  const double cap =
      static_cast<double>(first.length) * static_cast<double>(m) * (1.0 + kWorkloadCapDelta);
  std::vector<RoundGroup> groups;
  groups.push_back({first_cp, first.length, workload(first.length, first_cp), 1});
  std::vector<Placed> placed{{0, waiting.ids()[first.next], first.length}};
  ++first.next;
  int used = first_cp;
  double max_load = groups.front().load;
  // The groups of each size, so that a sample looks at one candidate group per size instead of
  // scanning them all; best_of_size finds the group Megatron's scan in creation order would take.
  for (auto& x : by_size) {
    x.groups.clear();
    x.tree.reset();
  }
  auto index = [&](int g) {
    const RoundGroup& group = groups[static_cast<size_t>(g)];
    SizeIndex* x = find_size(by_size, group.size);
    if (x == nullptr) {
      by_size.push_back({group.size, {}, {}});
      x = &by_size.back();
    }
    x->groups.push_back(g);
    x->tree.push(m * group.size - group.tokens, group.load);
    return x->groups.size() - 1;
  };
  index(0);

  // Places the sample as Megatron would; false when it waits for the next round.
  auto place = [&](int64_t id, int64_t length, int cp_min) {
    bool found = false;
    double best_score = 0.0;
    int best_group = -1;  // -1: a new group
    size_t best_at = 0;   // its position among the groups of its size
    int best_cp = 0;
    for (int64_t c = cp_min; c <= ranks; c *= 2) {
      // Every score is at least max_load, and only a lower one replaces the best.
      if (found && best_score <= max_load) break;
      const int cp = static_cast<int>(c);
      const double w = workload(length, cp);
      if (const SizeIndex* same_size = find_size(by_size, cp)) {
        const auto [at, score] = best_of_size(same_size->tree, length, w, max_load);
        if (at != detail::GroupFitTree::npos && score <= cap && (!found || score < best_score)) {
          found = true;
          best_score = score;
          best_group = same_size->groups[at];
          best_at = at;
          best_cp = cp;
        }
      }
      if (ranks - used >= cp) {
        const double score = std::max(max_load, w);
        if (score <= cap && (!found || score < best_score)) {
          found = true;
          best_score = score;
          best_group = -1;
          best_cp = cp;
        }
      }
    }
    if (!found) return false;
    if (best_group < 0) {
      groups.push_back({best_cp, 0, 0.0, 0});
      used += best_cp;
      best_group = static_cast<int>(groups.size()) - 1;
      best_at = index(best_group);
    }
    RoundGroup& group = groups[static_cast<size_t>(best_group)];
    group.tokens += length;
    group.load += workload(length, best_cp);
    ++group.members;
    placed.push_back({best_group, id, length});
    max_load = std::max(max_load, group.load);
    SizeIndex& grown = *find_size(by_size, best_cp);
    grown.tree.set(best_at, m * group.size - group.tokens, group.load);
    return true;
  };
  // The first class from `from` on that a sample could fit: one whose cp_min leaves room for a
  // new group, or one no longer than the room of a group of a size it may use (a class that
  // waits leaves the round unchanged, so the classes between wait too).
  auto next_that_may_fit = [&](size_t from) {
    size_t next = ranks - used >= 1 ? waiting.first_cp_at_most(from, ranks - used) : waiting.size();
    for (const SizeIndex& x : by_size) {
      if (x.groups.empty() || x.tree.most_room() < 1) continue;
      const size_t sized = waiting.first_cp_at_most(from, x.size);
      next = std::min(next, waiting.first_at_most(sized, x.tree.most_room()));
    }
    return waiting.open_from(next);
  };
  for (size_t c = first_class; c < waiting.size();) {
    detail::LengthClass& cls = waiting[c];
    const size_t before = cls.next;
    while (!cls.empty() && place(waiting.ids()[cls.next], cls.length, cls.cp_min)) ++cls.next;
    if (cls.next != before && c != first_class) touched.push_back({c, before});
    c = cls.empty() ? waiting.open_from(c + 1) : next_that_may_fit(c + 1);
  }

  // Idle ranks: double the first smallest group (later groups move right) while ranks are idle.
  while (used < ranks) {
    auto smallest = std::min_element(groups.begin(), groups.end(),
                                     [](const auto& a, const auto& b) { return a.size < b.size; });
    const int grown = std::min(smallest->size * 2, ranks);
    if (grown - smallest->size > ranks - used) {
      for (auto t = touched.rbegin(); t != touched.rend(); ++t) waiting[t->cls].next = t->next;
      detail::DraftMicrobatch whole = fill_whole_group(waiting, ranks, m, touched, time, height);
      for (const Touched& t : touched) waiting.close_if_empty(t.cls);
      return whole;
    }
    used += grown - smallest->size;
    smallest->size = grown;
  }
  for (const Touched& t : touched) waiting.close_if_empty(t.cls);
  return lay_out(groups, placed, time, height);
}

/// Doubles the first smallest group until the groups cover `ranks`; false when a doubling needs
/// more ranks than are idle.
bool expand_to_cover(std::vector<CpGroup>& groups, int ranks) {
  int used = 0;
  for (const auto& g : groups) used += g.size;
  while (used < ranks) {
    auto smallest = std::min_element(groups.begin(), groups.end(),
                                     [](const auto& a, const auto& b) { return a.size < b.size; });
    if (smallest->size > ranks - used) return false;
    used += smallest->size;
    smallest->size *= 2;
  }
  int rank = 0;
  for (auto& g : groups) {
    g.first_rank = rank;
    rank += g.size;
  }
  return true;
}

/// The VPP split of one micro-batch into (second half, first half), each re-expanded to all
/// ranks; false when the micro-batch has fewer than two groups or sizes that increase.
bool split_microbatch(const detail::DraftMicrobatch& mb, int ranks, detail::DraftMicrobatch& second,
                      detail::DraftMicrobatch& first) {
  const auto& groups = mb.groups;
  if (groups.size() < 2) return false;
  for (size_t g = 1; g < groups.size(); ++g) {
    if (groups[g].size > groups[g - 1].size) return false;
  }
  size_t k = 0;
  while (k < groups.size() && groups[k].first_rank < ranks / 2) ++k;
  first.groups.assign(groups.begin(), groups.begin() + static_cast<std::ptrdiff_t>(k));
  second.groups.assign(groups.begin() + static_cast<std::ptrdiff_t>(k), groups.end());
  if (!expand_to_cover(first.groups, ranks) || !expand_to_cover(second.groups, ranks)) {
    fail("default_dynamic_cp: splitting a micro-batch for the VPP group cannot re-cover all ",
         ranks,
         " dp*cp ranks by doubling CP groups (dp*cp is not a power of two); turn VPP off or use a "
         "power-of-two dp*cp");
  }
  return true;
}

void align_to_multiple(std::vector<detail::DraftMicrobatch>& mbs, int multiple, int ranks) {
  auto remainder = static_cast<int64_t>((multiple - mbs.size() % multiple) % multiple);
  auto i = static_cast<int64_t>(mbs.size()) - 1;
  int64_t attempts = 0;
  while (remainder > 0) {
    if (i < 0) {
      if (attempts >= static_cast<int64_t>(mbs.size())) {
        fail("default_dynamic_cp: ", mbs.size(),
             " micro-batches cannot be split into a multiple of the VPP group (", multiple,
             "): no micro-batch has two CP groups left to split; use a larger global batch");
      }
      i = static_cast<int64_t>(mbs.size()) - 1;
    }
    detail::DraftMicrobatch second;
    detail::DraftMicrobatch first;
    if (split_microbatch(mbs[static_cast<size_t>(i)], ranks, second, first)) {
      mbs[static_cast<size_t>(i)] = std::move(second);
      mbs.push_back(std::move(first));
      --remainder;
      attempts = 0;
    } else {
      ++attempts;
    }
    --i;
  }
}

}  // namespace

namespace detail {

ScoredPlan default_dynamic_cp_scored(const LengthGroups& by_length, const DynamicCpOptions& options,
                                     const CostModel* cost) {
  const int ranks = options.ranks();
  const int64_t m = options.max_seqlen_per_dp_cp_rank;
  ScoredPlan scored{Plan(options.dp, options.cp), 0.0};
  if (by_length.ids.empty()) return scored;
  WaitingSamples waiting(
      by_length, [&](int64_t length) { return cp_min_for_length(length, m, options.min_cp); });
  const LengthClass& longest = waiting[0];
  if (longest.cp_min > ranks) {
    fail("default_dynamic_cp: sample ", waiting.ids().front(), " has ", longest.length,
         " tokens and needs a CP group of ", longest.cp_min, " ranks, but dp*cp is ", ranks, "; ",
         kOversizeFix);
  }
  std::optional<TimeCache> time;
  if (cost != nullptr) time.emplace(*cost);
  std::vector<Touched> touched;
  std::vector<SizeIndex> by_size;
  // Without VPP each round's micro-batch goes straight into the plan while its groups are hot;
  // the VPP split (step 5) regroups micro-batches, so with it they are kept as a draft first.
  const bool vpp = options.microbatch_multiple > 1;
  DraftPlan draft{ranks, {}};
  scored.plan.reserve(0, 0, static_cast<int64_t>(by_length.ids.size()));
  while (waiting.open_from(0) < waiting.size()) {
    double height = 0;
    DraftMicrobatch mb =
        next_microbatch(waiting, options, touched, by_size, time ? &*time : nullptr, height);
    *scored.step += height;
    if (vpp) {
      draft.microbatches.push_back(std::move(mb));
      continue;
    }
    scored.plan.begin_microbatch();
    for (const CpGroup& g : mb.groups) scored.plan.add_group(g);
  }
  if (vpp) {
    const size_t rounds = draft.microbatches.size();
    align_to_multiple(draft.microbatches, options.microbatch_multiple, ranks);
    scored.plan = to_plan(draft, options.dp, options.cp);
    // The VPP split regroups micro-batches: their heights are no longer the rounds'.
    if (draft.microbatches.size() != rounds) scored.step.reset();
  }
  if (cost == nullptr) scored.step.reset();
  return scored;
}

}  // namespace detail

Plan schedule_default_dynamic_cp(std::span<const int64_t> ids,
                                 std::span<const int64_t> padded_lengths,
                                 const DynamicCpOptions& options) {
  validate_dynamic_cp_input(ids, padded_lengths, options);
  return detail::default_dynamic_cp_scored(detail::group_by_length(ids, padded_lengths), options,
                                           nullptr)
      .plan;
}

}  // namespace thdpack
