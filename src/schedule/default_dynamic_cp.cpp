// "default_dynamic_cp": Megatron-LM's packing-aware dynamic CP scheduler, reproduced exactly
// (SPEC §5; rules, ties and orders in docs/schedulers.md).
//
// Groups are kept in rank order: a new group always takes the lowest free ranks, and doubling a
// group shifts the later ones right, so creation order is rank order and every group is a
// contiguous range. All members of a group carry the same load, so the projected maximum rank
// load of a placement is max(current maximum, group load + L²/c) and costs O(1).
// Workloads are doubles computed as Megatron computes them ((L·L)/c, cap = L·M·(1 + 0.05)), so
// ties resolve identically; token budgets are exact integers (Megatron uses floats).

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

namespace {

constexpr double kWorkloadCapDelta = 0.05;

struct Sample {
  int64_t id;
  int64_t length;
};

struct RoundGroup {
  int size;
  int64_t tokens;
  double load;
  std::vector<int64_t> ids;
};

double workload(int64_t length, int cp) {
  return static_cast<double>(length) * static_cast<double>(length) / static_cast<double>(cp);
}

/// The groups of one size in creation order, and the fewest tokens any of them holds.
struct SizeIndex {
  int size;
  std::vector<int> groups;
  int64_t fewest_tokens;
};

/// The index of `size` in `indexes` (a handful of sizes per round), or nullptr.
SizeIndex* find_size(std::vector<SizeIndex>& indexes, int size) {
  for (auto& x : indexes) {
    if (x.size == size) return &x;
  }
  return nullptr;
}

/// Lays the groups out from rank 0 in order.
DynamicCpMicrobatch lay_out(std::vector<RoundGroup>& groups) {
  DynamicCpMicrobatch mb;
  int rank = 0;
  for (auto& g : groups) {
    mb.groups.push_back(CpGroup{rank, g.size, std::move(g.ids)});
    rank += g.size;
  }
  return mb;
}

/// Whole-group fallback: first-fit of the round's samples (descending) onto all G ranks.
DynamicCpMicrobatch fill_whole_group(const std::vector<Sample>& round, int ranks, int64_t m,
                                     std::vector<Sample>& leftovers) {
  leftovers.clear();
  CpGroup all{0, ranks, {}};
  int64_t tokens = 0;
  for (const Sample& s : round) {
    if (!sum_exceeds(tokens, s.length, m * ranks)) {
      all.ids.push_back(s.id);
      tokens += s.length;
    } else {
      leftovers.push_back(s);
    }
  }
  DynamicCpMicrobatch mb;
  mb.groups.push_back(std::move(all));
  return mb;
}

/// One scheduling round: the micro-batch formed from `round` (sorted by length descending); the
/// samples that wait for the next round go to `leftovers`, in the same order.
DynamicCpMicrobatch next_microbatch(const std::vector<Sample>& round, const DynamicCpOptions& o,
                                    std::vector<Sample>& leftovers) {
  const int ranks = o.ranks();
  const int64_t m = o.max_seqlen_per_dp_cp_rank;
  leftovers.clear();

  const Sample& first = round.front();
  const int first_cp = cp_min_for_length(first.length, m, o.min_cp);
  const double cap =
      static_cast<double>(first.length) * static_cast<double>(m) * (1.0 + kWorkloadCapDelta);
  std::vector<RoundGroup> groups;
  groups.push_back({first_cp, first.length, workload(first.length, first_cp), {first.id}});
  int used = first_cp;
  double max_load = groups.front().load;
  // The groups of each size in creation order, and the fewest tokens any of them holds, so a
  // size no group of which has room is skipped whole. Scanning one size's groups in creation
  // order is the scan of all groups in creation order that skips other sizes, so every decision
  // and tie is Megatron's.
  std::vector<SizeIndex> by_size;
  auto index = [&](int g) {
    const RoundGroup& group = groups[static_cast<size_t>(g)];
    SizeIndex* x = find_size(by_size, group.size);
    if (x == nullptr) {
      by_size.push_back({group.size, {}, group.tokens});
      x = &by_size.back();
    }
    x->groups.push_back(g);
    x->fewest_tokens = std::min(x->fewest_tokens, group.tokens);
  };
  index(0);

  for (size_t i = 1; i < round.size(); ++i) {
    const Sample& s = round[i];
    bool found = false;
    double best_score = 0.0;
    int best_group = -1;  // -1: a new group
    int best_cp = 0;
    for (int64_t c = cp_min_for_length(s.length, m, o.min_cp); c <= ranks; c *= 2) {
      const int cp = static_cast<int>(c);
      const double w = workload(s.length, cp);
      const SizeIndex* same_size = find_size(by_size, cp);
      if (same_size != nullptr && same_size->fewest_tokens + s.length <= m * c) {
        for (const int g : same_size->groups) {
          const RoundGroup& group = groups[static_cast<size_t>(g)];
          if (group.tokens + s.length > m * c) continue;
          const double score = std::max(max_load, group.load + w);
          if (score <= cap && (!found || score < best_score)) {
            found = true;
            best_score = score;
            best_group = g;
            best_cp = cp;
          }
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
    if (!found) {
      leftovers.push_back(s);
      continue;
    }
    if (best_group < 0) {
      groups.push_back({best_cp, 0, 0.0, {}});
      used += best_cp;
      best_group = static_cast<int>(groups.size()) - 1;
      index(best_group);
    }
    RoundGroup& group = groups[static_cast<size_t>(best_group)];
    group.tokens += s.length;
    group.load += workload(s.length, best_cp);
    group.ids.push_back(s.id);
    max_load = std::max(max_load, group.load);
    SizeIndex& grown = *find_size(by_size, best_cp);
    grown.fewest_tokens = std::numeric_limits<int64_t>::max();
    for (const int g : grown.groups) {
      grown.fewest_tokens = std::min(grown.fewest_tokens, groups[static_cast<size_t>(g)].tokens);
    }
  }

  // Idle ranks: double the first smallest group (later groups move right) while ranks are idle.
  while (used < ranks) {
    auto smallest = std::min_element(groups.begin(), groups.end(),
                                     [](const auto& a, const auto& b) { return a.size < b.size; });
    const int grown = std::min(smallest->size * 2, ranks);
    if (grown - smallest->size > ranks - used) return fill_whole_group(round, ranks, m, leftovers);
    used += grown - smallest->size;
    smallest->size = grown;
  }
  return lay_out(groups);
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
bool split_microbatch(const DynamicCpMicrobatch& mb, int ranks, DynamicCpMicrobatch& second,
                      DynamicCpMicrobatch& first) {
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
    throw InvalidArgument(
        "default_dynamic_cp: splitting a micro-batch for the VPP group cannot re-cover all " +
        std::to_string(ranks) +
        " dp*cp ranks by doubling CP groups (dp*cp is not a power of two); turn VPP off or use a "
        "power-of-two dp*cp");
  }
  return true;
}

void align_to_multiple(std::vector<DynamicCpMicrobatch>& mbs, int multiple, int ranks) {
  auto remainder = static_cast<int64_t>((multiple - mbs.size() % multiple) % multiple);
  auto i = static_cast<int64_t>(mbs.size()) - 1;
  int64_t attempts = 0;
  while (remainder > 0) {
    if (i < 0) {
      if (attempts >= static_cast<int64_t>(mbs.size())) {
        throw InvalidArgument(
            "default_dynamic_cp: " + std::to_string(mbs.size()) +
            " micro-batches cannot be split into a multiple of the VPP group (" +
            std::to_string(multiple) +
            "): no micro-batch has two CP groups left to split; use a larger global batch");
      }
      i = static_cast<int64_t>(mbs.size()) - 1;
    }
    DynamicCpMicrobatch second;
    DynamicCpMicrobatch first;
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

DynamicCpPlan schedule_default_dynamic_cp(std::span<const int64_t> ids,
                                          std::span<const int64_t> padded_lengths,
                                          const DynamicCpOptions& options) {
  validate_dynamic_cp_input(ids, padded_lengths, options);

  std::vector<Sample> remaining(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) remaining[i] = {ids[i], padded_lengths[i]};
  std::stable_sort(remaining.begin(), remaining.end(), [](const Sample& a, const Sample& b) {
    return a.length > b.length || (a.length == b.length && a.id < b.id);
  });

  const int ranks = options.ranks();
  DynamicCpPlan plan;
  plan.ranks = ranks;
  if (remaining.empty()) return plan;
  const int longest_cp = cp_min_for_length(remaining.front().length,
                                           options.max_seqlen_per_dp_cp_rank, options.min_cp);
  if (longest_cp > ranks) {
    throw InvalidArgument("default_dynamic_cp: sample " + std::to_string(remaining.front().id) +
                          " has " + std::to_string(remaining.front().length) +
                          " tokens and needs a CP group of " + std::to_string(longest_cp) +
                          " ranks, but dp*cp is " + std::to_string(ranks) +
                          "; raise --max-seqlen-per-dp-cp-rank or truncate");
  }
  std::vector<Sample> leftovers;
  while (!remaining.empty()) {
    plan.microbatches.push_back(next_microbatch(remaining, options, leftovers));
    remaining.swap(leftovers);
  }
  if (options.microbatch_multiple > 1) {
    align_to_multiple(plan.microbatches, options.microbatch_multiple, ranks);
  }
  return plan;
}

}  // namespace thdpack
