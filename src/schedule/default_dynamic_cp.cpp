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

/// One round of Megatron's placement: the groups formed so far (in rank order), their index by
/// size, the samples placed and the ranks used.
class Round {
 public:
  /// A round opened by the first waiting sample of `first`, in a group of its cp_min.
  /// `by_size` is scratch kept across rounds (its vectors keep their capacity).
  Round(const ScheduleOptions& o, std::vector<SizeIndex>& by_size, const detail::LengthClass& first,
        int64_t first_id)
      : ranks_(o.ranks()),
        m_(o.max_seqlen_per_dp_cp_rank),
        cap_(static_cast<double>(first.length) * static_cast<double>(m_) *
             (1.0 + kWorkloadCapDelta)),
        by_size_(by_size) {
    // The groups of each size, so that a sample looks at one candidate group per size instead of
    // scanning them all; best_of_size finds the group Megatron's scan in creation order would
    // take.
    for (auto& x : by_size_) {
      x.groups.clear();
      x.tree.reset();
    }
    groups_.push_back({first.cp_min, first.length, workload(first.length, first.cp_min), 1});
    placed_.push_back({0, first_id, first.length});
    used_ = first.cp_min;
    max_load_ = groups_.front().load;
    index(0);
  }

  /// Places the sample as Megatron would; false when it waits for the next round.
  bool place(int64_t id, int64_t length, int cp_min) {
    const std::optional<Choice> best = best_choice(length, cp_min);
    if (!best) return false;
    int g = best->group;
    size_t at = best->at;
    if (g < 0) {
      groups_.push_back({best->cp, 0, 0.0, 0});
      used_ += best->cp;
      g = static_cast<int>(groups_.size()) - 1;
      at = index(g);
    }
    RoundGroup& group = groups_[static_cast<size_t>(g)];
    group.tokens += length;
    group.load += workload(length, best->cp);
    ++group.members;
    placed_.push_back({g, id, length});
    max_load_ = std::max(max_load_, group.load);
    find_size(by_size_, best->cp)->tree.set(at, m_ * group.size - group.tokens, group.load);
    return true;
  }

  /// The first class from `from` on that a sample could fit: one whose cp_min leaves room for a
  /// new group, or one no longer than the room of a group of a size it may use (a class that
  /// waits leaves the round unchanged, so the classes between wait too).
  size_t next_that_may_fit(detail::WaitingSamples& waiting, size_t from) const {
    size_t next =
        ranks_ - used_ >= 1 ? waiting.first_cp_at_most(from, ranks_ - used_) : waiting.size();
    for (const SizeIndex& x : by_size_) {
      if (x.groups.empty() || x.tree.most_room() < 1) continue;
      const size_t sized = waiting.first_cp_at_most(from, x.size);
      next = std::min(next, waiting.first_at_most(sized, x.tree.most_room()));
    }
    return waiting.open_from(next);
  }

  /// Idle ranks: doubles the first smallest group (later groups move right) while ranks are
  /// idle; false when a doubling needs more ranks than are idle (the whole-group fallback).
  bool cover_idle_ranks() {
    while (used_ < ranks_) {
      auto smallest =
          std::min_element(groups_.begin(), groups_.end(),
                           [](const auto& a, const auto& b) { return a.size < b.size; });
      const int grown = std::min(smallest->size * 2, ranks_);
      if (grown - smallest->size > ranks_ - used_) return false;
      used_ += grown - smallest->size;
      smallest->size = grown;
    }
    return true;
  }

  detail::DraftMicrobatch lay_out(detail::TimeCache* time, double& height) const {
    return thdpack::lay_out(groups_, placed_, time, height);
  }

 private:
  /// Where a sample goes: a group (-1: a new one of size cp) at position `at` among its size's.
  struct Choice {
    double score;
    int group;
    size_t at;
    int cp;
  };

  /// Megatron's choice over the sizes cp_min, 2·cp_min, ... G: the least score within the cap,
  /// the smaller size and an existing group first on ties; none when the sample must wait.
  std::optional<Choice> best_choice(int64_t length, int cp_min) const {
    std::optional<Choice> best;
    for (int64_t c = cp_min; c <= ranks_; c *= 2) {
      // Every score is at least max_load, and only a lower one replaces the best.
      if (best && best->score <= max_load_) break;
      const int cp = static_cast<int>(c);
      const double w = workload(length, cp);
      if (const SizeIndex* same_size = find_size(by_size_, cp)) {
        const auto [at, score] = best_of_size(same_size->tree, length, w, max_load_);
        if (at != detail::GroupFitTree::npos && score <= cap_ && (!best || score < best->score)) {
          best = Choice{score, same_size->groups[at], at, cp};
        }
      }
      if (ranks_ - used_ >= cp) {
        const double score = std::max(max_load_, w);
        if (score <= cap_ && (!best || score < best->score)) best = Choice{score, -1, 0, cp};
      }
    }
    return best;
  }

  /// Adds group g to the index of its size; its position there.
  size_t index(int g) {
    const RoundGroup& group = groups_[static_cast<size_t>(g)];
    SizeIndex* x = find_size(by_size_, group.size);
    if (x == nullptr) {
      by_size_.push_back({group.size, {}, {}});
      x = &by_size_.back();
    }
    x->groups.push_back(g);
    x->tree.push(m_ * group.size - group.tokens, group.load);
    return x->groups.size() - 1;
  }

  const int ranks_;
  const int64_t m_;
  const double cap_;
  std::vector<SizeIndex>& by_size_;
  std::vector<RoundGroup> groups_;
  std::vector<Placed> placed_;
  int used_ = 0;
  double max_load_ = 0;
};

/// One scheduling round: the micro-batch it forms from the waiting samples; placed samples leave
/// them (empty classes are closed). `touched` and `by_size` are scratch kept between rounds. With
/// `time`, `height` is the micro-batch's modeled height.
detail::DraftMicrobatch next_microbatch(detail::WaitingSamples& waiting, const ScheduleOptions& o,
                                        std::vector<Touched>& touched,
                                        std::vector<SizeIndex>& by_size, detail::TimeCache* time,
                                        double& height) {
  touched.clear();
  const size_t first_class = waiting.open_from(0);
  detail::LengthClass& first = waiting[first_class];
  touched.push_back({first_class, first.next});
  Round round(o, by_size, first, waiting.ids()[first.next]);
  ++first.next;
  for (size_t c = first_class; c < waiting.size();) {
    detail::LengthClass& cls = waiting[c];
    const size_t before = cls.next;
    while (!cls.empty() && round.place(waiting.ids()[cls.next], cls.length, cls.cp_min)) {
      ++cls.next;
    }
    if (cls.next != before && c != first_class) touched.push_back({c, before});
    c = cls.empty() ? waiting.open_from(c + 1) : round.next_that_may_fit(waiting, c + 1);
  }
  if (!round.cover_idle_ranks()) {
    for (auto t = touched.rbegin(); t != touched.rend(); ++t) waiting[t->cls].next = t->next;
    detail::DraftMicrobatch whole =
        fill_whole_group(waiting, o.ranks(), o.max_seqlen_per_dp_cp_rank, touched, time, height);
    for (const Touched& t : touched) waiting.close_if_empty(t.cls);
    return whole;
  }
  for (const Touched& t : touched) waiting.close_if_empty(t.cls);
  return round.lay_out(time, height);
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

ScoredPlan default_dynamic_cp_scored(const LengthGroups& by_length, const ScheduleOptions& options,
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
                                 const ScheduleOptions& options) {
  validate_dynamic_cp_input(ids, padded_lengths, options);
  return detail::default_dynamic_cp_scored(detail::group_by_length(ids, padded_lengths), options,
                                           nullptr)
      .plan;
}

}  // namespace thdpack
