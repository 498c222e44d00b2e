// "balanced_dynamic_cp": CP size, group and micro-batch chosen together to minimise the modeled
// step (the sum over micro-batches of the slowest group) under the CP cost model.
//
// 1. Samples come by rank-time (c·time at their smallest allowed size), most first, ties by id.
// 2. For a micro-batch count K (from the token bound up, in VPP multiples), samples are dealt to
//    the micro-batch with the least rank-time that has token room; each micro-batch is then packed
//    at the lowest height it reaches (bisection): at a height H a sample joins an existing group
//    with token room and time left (the least rank-time added), else opens a group of the
//    smallest allowed size that finishes by H, so long samples spread until they do.
// 3. Free ranks: the slowest group grows while that lowers the height; ranks still free go to the
//    growth that raises it least; when none fits, the micro-batch runs as one group of all ranks.
// 4. The first K that packs and a few more are tried; the smallest modeled step wins.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "schedule/dynamic_cp_sizes.hpp"
#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {

namespace {

struct Item {
  int64_t id;
  int64_t length;
  std::vector<int> sizes;  ///< allowed CP sizes, ascending
  double area;             ///< rank-seconds at the smallest size
};

// After the first K that packs, this many more are tried (the step hardly depends on K, but
// more micro-batches leave more room to balance).
constexpr int64_t kExtraKTries = 6;
// The height search stops within this fraction of the best height found.
constexpr double kHeightTolerance = 0.004;

struct Group {
  int size;
  int64_t tokens;
  double time;
  std::vector<int64_t> ids;
  std::vector<int64_t> lengths;
};

struct Level {
  std::vector<Group> groups;
  int free;
  double height = 0;
};

double group_time(const Group& g, int size, const CpCostModel& cost) {
  double t = 0;
  for (const int64_t len : g.lengths) t += cost.time(len, size);
  return t;
}

void recompute_height(Level& level) {
  level.height = 0;
  for (const auto& g : level.groups) level.height = std::max(level.height, g.time);
}

/// The next allowed size above `size` for a group holding these samples, or 0.
int next_size(int size, const DynamicCpOptions& o) {
  const int ranks = o.ranks();
  if (size >= ranks) return 0;
  if (size * 2 <= ranks) return size * 2;
  return allowed_cp_group_size(ranks, o) ? ranks : 0;
}

/// Grows `g` to `size` ranks.
void grow(Level& level, Group& g, int size, const CpCostModel& cost) {
  level.free -= size - g.size;
  g.size = size;
  g.time = group_time(g, size, cost);
  recompute_height(level);
}

/// Step 3 for one micro-batch.
void spend_free_ranks(Level& level, const DynamicCpOptions& o) {
  const CpCostModel& cost = o.cost;
  // Grow the slowest group while that lowers the height.
  while (level.free > 0) {
    auto slowest = std::max_element(level.groups.begin(), level.groups.end(),
                                    [](const Group& a, const Group& b) { return a.time < b.time; });
    const int size = next_size(slowest->size, o);
    if (size == 0 || size - slowest->size > level.free) break;
    const double t = group_time(*slowest, size, cost);
    double others = 0;
    for (const auto& g : level.groups) {
      if (&g != &*slowest) others = std::max(others, g.time);
    }
    if (std::max(others, t) >= level.height) break;
    grow(level, *slowest, size, cost);
  }
  // Cover the remaining free ranks with the growth that raises the height least.
  while (level.free > 0) {
    Group* best = nullptr;
    int best_size = 0;
    double best_height = std::numeric_limits<double>::infinity();
    for (auto& g : level.groups) {
      const int size = next_size(g.size, o);
      if (size == 0 || size - g.size > level.free) continue;
      const double h = std::max(level.height, group_time(g, size, cost));
      if (h < best_height || (h == best_height && best != nullptr && g.size < best->size)) {
        best = &g;
        best_size = size;
        best_height = h;
      }
    }
    if (best == nullptr) {
      // No growth fits the free ranks: one group of all ranks (tokens <= M·G by construction).
      Group all{o.ranks(), 0, 0.0, {}, {}};
      for (auto& g : level.groups) {
        all.tokens += g.tokens;
        all.ids.insert(all.ids.end(), g.ids.begin(), g.ids.end());
        all.lengths.insert(all.lengths.end(), g.lengths.begin(), g.lengths.end());
      }
      all.time = group_time(all, o.ranks(), cost);
      level.groups = {std::move(all)};
      level.free = 0;
      recompute_height(level);
      return;
    }
    grow(level, *best, best_size, cost);
  }
}

/// The CP size of `item` for a micro-batch of height `height`: the smallest allowed size whose
/// time fits, else the fastest.
int size_for_height(const Item& item, double height, const DynamicCpOptions& o) {
  int fastest = item.sizes.front();
  for (const int c : item.sizes) {
    const double t = o.cost.time(item.length, c);
    if (t <= height) return c;
    if (t < o.cost.time(item.length, fastest)) fastest = c;
  }
  return fastest;
}

/// The groups of one micro-batch that all finish by `height`, or nothing when the samples do not
/// fit. Samples come most costly first. A sample joins an existing group when one of an allowed
/// size has token room and time left for it (the least rank-time added, then the least time left
/// after it): that time is spent anyway, while a new group takes ranks. Otherwise it opens a group
/// of the smallest allowed size that finishes in time.
std::optional<Level> pack_at_height(const std::vector<const Item*>& items, double height,
                                    const DynamicCpOptions& o) {
  const int64_t m = o.max_seqlen_per_dp_cp_rank;
  const CpCostModel& cost = o.cost;
  Level level{{}, o.ranks(), 0.0};
  for (const Item* item : items) {
    const int fresh = size_for_height(*item, height, o);
    const double fresh_time = cost.time(item->length, fresh);
    const bool fresh_fits = fresh <= level.free && fresh_time <= height;
    Group* best = nullptr;
    double best_area = 0;
    double best_left = 0;
    for (auto& g : level.groups) {
      if (g.size < item->sizes.front() || g.tokens + item->length > m * g.size) continue;
      const double t = cost.time(item->length, g.size);
      const double left = height - g.time - t;
      if (left < 0) continue;
      const double area = g.size * t;
      if (best == nullptr || area < best_area || (area == best_area && left < best_left)) {
        best = &g;
        best_area = area;
        best_left = left;
      }
    }
    if (best == nullptr) {
      if (!fresh_fits) return std::nullopt;
      level.free -= fresh;
      level.groups.push_back(Group{fresh, 0, 0.0, {}, {}});
      best = &level.groups.back();
    }
    best->tokens += item->length;
    best->time += cost.time(item->length, best->size);
    best->ids.push_back(item->id);
    best->lengths.push_back(item->length);
  }
  recompute_height(level);
  spend_free_ranks(level, o);
  return level;
}

/// The lowest height (to within kHeightTolerance) at which the micro-batch packs; empty when it
/// never does.
std::optional<Level> pack_microbatch(const std::vector<const Item*>& items,
                                     const DynamicCpOptions& o) {
  double area = 0;
  double fastest_longest = 0;
  double slowest = 0;
  for (const Item* item : items) {
    area += o.cost.area(item->length, item->sizes.front());
    double best = o.cost.time(item->length, item->sizes.front());
    for (const int c : item->sizes) best = std::min(best, o.cost.time(item->length, c));
    fastest_longest = std::max(fastest_longest, best);
    slowest += o.cost.time(item->length, item->sizes.front());
  }
  double lo = std::max(area / o.ranks(), fastest_longest);
  double hi = std::max(lo, slowest);
  auto best = pack_at_height(items, hi, o);
  if (!best) return std::nullopt;
  if (auto at_lo = pack_at_height(items, lo, o)) return at_lo;
  for (int step = 0; step < 40 && hi - lo > kHeightTolerance * lo; ++step) {
    const double mid = 0.5 * (lo + hi);
    if (auto level = pack_at_height(items, mid, o)) {
      hi = mid;
      if (level->height < best->height) best = std::move(level);
    } else {
      lo = mid;
    }
  }
  return best;
}

/// All micro-batches for K of them: samples dealt by area, most first, to the micro-batch with
/// the least area that has token room; then each packed at its lowest height. Empty when one
/// does not pack.
std::optional<std::vector<Level>> plan_with(int64_t k, const std::vector<Item>& items,
                                            const DynamicCpOptions& o) {
  const int64_t room = o.max_seqlen_per_dp_cp_rank * o.ranks();
  std::vector<std::vector<const Item*>> members(static_cast<size_t>(k));
  std::vector<double> area(static_cast<size_t>(k), 0.0);
  std::vector<int64_t> tokens(static_cast<size_t>(k), 0);
  for (const Item& item : items) {
    size_t best = members.size();
    for (size_t j = 0; j < members.size(); ++j) {
      if (sum_exceeds(tokens[j], item.length, room)) continue;
      if (best == members.size() || area[j] < area[best]) best = j;
    }
    if (best == members.size()) return std::nullopt;
    members[best].push_back(&item);
    area[best] += item.area;
    tokens[best] += item.length;
  }
  std::vector<Level> levels;
  for (const auto& group : members) {
    if (group.empty()) return std::nullopt;
    auto level = pack_microbatch(group, o);
    if (!level) return std::nullopt;
    levels.push_back(std::move(*level));
  }
  return levels;
}

double total_height(const std::vector<Level>& levels) {
  double sum = 0;
  for (const auto& l : levels) sum += l.height;
  return sum;
}
}  // namespace

DynamicCpPlan schedule_balanced_dynamic_cp(std::span<const int64_t> ids,
                                           std::span<const int64_t> padded_lengths,
                                           const DynamicCpOptions& options) {
  validate_dynamic_cp_input(ids, padded_lengths, options);
  std::vector<Item> items(ids.size());
  int64_t total_tokens = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto sizes = detail::candidate_cp_sizes(padded_lengths[i], options);
    if (sizes.empty()) {
      throw InvalidArgument("balanced_dynamic_cp: sample " + std::to_string(ids[i]) + " has " +
                            std::to_string(padded_lengths[i]) + " tokens, more than M x dp*cp = " +
                            std::to_string(options.max_seqlen_per_dp_cp_rank * options.ranks()) +
                            "; raise --max-seqlen-per-dp-cp-rank or truncate");
    }
    const double area = options.cost.area(padded_lengths[i], sizes.front());
    items[i] = {ids[i], padded_lengths[i], std::move(sizes), area};
    total_tokens = checked_add(total_tokens, padded_lengths[i], "balanced_dynamic_cp total tokens");
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.area > b.area || (a.area == b.area && a.id < b.id);
  });

  // K from the token bound upward (in VPP multiples) to the first that packs, then a few more:
  // the modeled step hardly depends on K, but more micro-batches pack more easily.
  const int64_t multiple = options.microbatch_multiple;
  const int64_t room = options.max_seqlen_per_dp_cp_rank * options.ranks();
  int64_t k = total_tokens < 1 ? 1 : (total_tokens - 1) / room + 1;
  k = (k + multiple - 1) / multiple * multiple;
  const auto n = static_cast<int64_t>(items.size());
  std::optional<std::vector<Level>> best;
  int64_t tries_after_first = 0;
  for (; k <= n && tries_after_first < kExtraKTries; k += multiple) {
    auto levels = plan_with(k, items, options);
    if (best) ++tries_after_first;
    if (levels && (!best || total_height(*levels) < total_height(*best))) best = std::move(levels);
  }
  if (!best) {
    throw InvalidArgument("balanced_dynamic_cp: " + std::to_string(n) +
                          " samples cannot fill a multiple of the VPP group (" +
                          std::to_string(multiple) + ") of micro-batches; use a larger batch");
  }
  auto& levels = *best;
  DynamicCpPlan plan;
  plan.ranks = options.ranks();
  for (auto& level : levels) {
    DynamicCpMicrobatch mb;
    int rank = 0;
    // Larger groups first: the layout Megatron's runtime expects (non-increasing sizes).
    std::stable_sort(level.groups.begin(), level.groups.end(),
                     [](const Group& a, const Group& b) { return a.size > b.size; });
    for (auto& g : level.groups) {
      mb.groups.push_back(CpGroup{rank, g.size, std::move(g.ids)});
      rank += g.size;
    }
    plan.microbatches.push_back(std::move(mb));
  }
  return plan;
}

}  // namespace thdpack
