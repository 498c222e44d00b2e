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
//    Up to 2^12 samples, the samples are then dealt again by the rank-time their packing gave
//    them (up to three times, while the step falls): at every K tried up to 2^11 samples, at the
//    K found above.
// 4. The first K that packs and more are tried, growing by 4% (then faster) while the step falls
//    by enough; the smallest modeled step wins. Above 2^12 samples (from 512 ranks, or where step
//    6 declines the batch) the K is searched on a stride sample and scaled.
// 5. default_dynamic_cp's plan is made first, and returned as it is when its modeled step is
//    within kNearBound of the lower bound; otherwise it is kept where its step is not larger than
//    ours (on batches of many samples per rank Megatron's greedy is near the bound, and under the
//    full cost model it can beat the packing), so the plan is never slower than Megatron's.
// 6. A batch of at least twice max(2^11, 8·G) samples is planned by replicating the plan (steps
//    1-5) of a stride sample of its samples by length (dynamic_cp_template.hpp): steps 1-4 on all
//    its samples cost far more than the template, which costs about what 2,048 samples do, and on
//    batches of many samples per rank the replicated plan comes close to theirs.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "schedule/dynamic_cp_sizes.hpp"
#include "schedule/dynamic_cp_step.hpp"
#include "schedule/dynamic_cp_template.hpp"
#include "schedule/length_by_id.hpp"
#include "schedule/length_order.hpp"
#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/oversize_fix.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {

namespace {

/// Every group size a plan may use (allowed_cp_group_size), ascending, and each sample's time
/// on each of them, computed once: the packing probes many heights and groups.
struct SizeTable {
  std::vector<int> sizes;
  size_t slots() const { return sizes.size(); }
  /// The slot of an allowed `size`.
  int slot_of(int size) const {
    return static_cast<int>(std::lower_bound(sizes.begin(), sizes.end(), size) - sizes.begin());
  }
};

SizeTable make_size_table(const ScheduleOptions& o) {
  SizeTable t;
  const int ranks = o.ranks();
  for (int64_t c = 1; c <= ranks; c *= 2) t.sizes.push_back(static_cast<int>(c));
  for (int64_t c = o.min_cp; c <= ranks; c *= 2) t.sizes.push_back(static_cast<int>(c));
  t.sizes.push_back(ranks);
  std::sort(t.sizes.begin(), t.sizes.end());
  t.sizes.erase(std::unique(t.sizes.begin(), t.sizes.end()), t.sizes.end());
  return t;
}

struct Item {
  int64_t id;
  int64_t length;
  std::span<const int> slots;  ///< allowed CP sizes of this sample, as SizeTable slots, ascending
  double area;                 ///< rank-seconds at the smallest size
  const double* times;         ///< time on each SizeTable slot
};

// After the first K that packs, at least this many more are tried, each kKGrowth larger (at
// least one VPP multiple), and then more while the last kKMisses did not all fail to improve.
// Past the first kTriesAtKGrowth tries, each K that improves doubles the growth to the next (a
// miss resets it to kKGrowth). On a batch of few micro-batches that is K + 1 .. K + 6; on one of
// hundreds the step falls steeply from the first K that packs (tokens then fill every
// micro-batch, so long samples share groups) over somewhat more micro-batches, and under L²/c it
// goes on falling, ever more slowly, over several times more: the doubling gets there in a few
// tries instead of dozens. The first kTriesAtKGrowth tries keep the small step: doubling from
// the first skips the Ks just past the first that packs, where the full cost model's best K
// usually lies.
constexpr int64_t kExtraKTries = 6;
constexpr int64_t kTriesAtKGrowth = 3;
constexpr double kKGrowth = 0.04;
constexpr int64_t kKMisses = 2;
// A K improves on the best only when its step is lower by kKMinGain per doubling of the best K's
// micro-batches (log2 of their ratio): the cost models price no micro-batch, so under L²/c the
// step falls towards one sample per micro-batch on all ranks, by ever less, and without this rule
// the search chases negligible gains out to micro-batches of one or two samples each, paying a
// whole plan per K tried.
constexpr double kKMinGain = 0.001;
constexpr double kMostKGrowth = 16;  // K never grows past 17 times the last tried, in range
// Above this many samples, K is searched on every stride-th sample (as many as this) and the
// K found, scaled to all samples, is planned once (or the next of kSampledKTries multiples that
// packs): each K tried costs a whole plan, and the search tries about ten, so on a large batch
// the search on all samples costs several plans while the sampled K plans about as well.
constexpr int64_t kSampledKSearchAbove = int64_t{1} << 12;
constexpr int64_t kSampledKTries = 8;
// A plan is dealt again by the rank-times its packing gave the samples at most this many times.
constexpr int kRedeals = 3;
// Up to this many samples every K tried is dealt again; above (to kSampledKSearchAbove), only the
// K the search finds: each dealing costs a try, so dealing again at every K cost more than the
// search itself on large batches, mostly on the first Ks, where the step is still far from its
// best.
constexpr int64_t kRedealEveryKUpTo = 2048;
// A batch of at least twice as many samples as this, and as this many per rank, is planned from
// the plan of a stride sample of that many (step 6).
constexpr int64_t kTemplateSamples = int64_t{1} << 11;
constexpr int64_t kTemplateSamplesPerRank = 8;

// Megatron's plan (step 5) is kept without making ours when its modeled step is within this
// fraction of the lower bound: ours could be faster by no more. On very large batches its plans
// often land that near the bound, and making ours (the template's) would then be a large part of
// the planning time for no gain.
constexpr double kNearBound = 0.0025;
// The height search stops within this fraction of the best height found.
constexpr double kHeightTolerance = 0.004;

int64_t template_samples(const ScheduleOptions& o) {
  return std::max(kTemplateSamples, kTemplateSamplesPerRank * o.ranks());
}

struct Group {
  int slot;  ///< its size, as a SizeTable slot
  int size;
  int64_t tokens;
  double time;
  std::vector<const Item*> members;
};

struct Level {
  std::vector<Group> groups;
  int free;
  double height = 0;
};

/// A group in its size's index: ordered by time, then (among equal times) by descending index, so
/// walking down from the largest time that fits meets the oldest such group first.
struct GroupKey {
  double time;
  int group;
  bool operator<(const GroupKey& o) const {
    return time < o.time || (time == o.time && group > o.group);
  }
};

/// A size's groups by GroupKey, sorted (a few hundred at most: a sorted vector beats a tree).
using SizeIndex = std::vector<GroupKey>;

/// What the packing of one micro-batch reads, and the indexes it reuses between calls.
struct PackContext {
  const ScheduleOptions& options;
  const SizeTable& table;
  std::vector<SizeIndex>& by_size;  ///< one per SizeTable slot
  /// When set, the height search starts from the last micro-batch's height over its bound (kept
  /// here, across micro-batches, dealings and K) instead of from the bound: micro-batches dealt
  /// alike land at alike heights over their bounds, so that saves most of the heights probed.
  double* last_height_over_bound = nullptr;
  /// Whether plan_with deals again by the rank-times a packing gave (see plan_with).
  bool deal_again = true;
};

double group_time(const Group& g, int slot) {
  double t = 0;
  for (const Item* item : g.members) t += item->times[slot];
  return t;
}

void recompute_height(Level& level) {
  level.height = 0;
  for (const auto& g : level.groups) level.height = std::max(level.height, g.time);
}

/// The next allowed size above `size` for a group holding these samples, or 0.
int next_size(int size, const ScheduleOptions& o) {
  const int ranks = o.ranks();
  if (size >= ranks) return 0;
  if (size * 2 <= ranks) return size * 2;
  return allowed_cp_group_size(ranks, o) ? ranks : 0;
}

/// Grows `g` to `size` ranks (the level's height is the caller's to update).
void grow(Level& level, Group& g, int size, const SizeTable& table) {
  level.free -= size - g.size;
  g.size = size;
  g.slot = table.slot_of(size);
  g.time = group_time(g, g.slot);
}

/// When no group can grow into the free ranks (they are fewer than the smallest group), one
/// sample moves out of a group of several onto a new group of the largest allowed size that fits
/// the free ranks: the move that leaves the lowest height, then the least time moved. False when
/// no sample can move (none fits such a group).
bool move_to_free_ranks(Level& level, const PackContext& ctx) {
  const ScheduleOptions& o = ctx.options;
  int size = 0;
  for (int c = 1; c <= level.free; c *= 2) {
    if (allowed_cp_group_size(c, o)) size = c;
  }
  if (o.min_cp <= level.free && allowed_cp_group_size(o.min_cp, o)) size = std::max(size, o.min_cp);
  if (size == 0) return false;
  const int slot = ctx.table.slot_of(size);
  const int64_t room = o.max_seqlen_per_dp_cp_rank * size;
  int from = -1;
  size_t which = 0;
  double best_height = std::numeric_limits<double>::infinity();
  double best_moved = 0;
  for (size_t g = 0; g < level.groups.size(); ++g) {
    const Group& group = level.groups[g];
    if (group.members.size() < 2) continue;
    double others = 0;  // the height without this group
    for (size_t h = 0; h < level.groups.size(); ++h) {
      if (h != g) others = std::max(others, level.groups[h].time);
    }
    for (size_t i = 0; i < group.members.size(); ++i) {
      const Item* item = group.members[i];
      if (item->slots.front() > slot || item->length > room) continue;
      const double moved = item->times[slot];
      const double height = std::max({others, group.time - item->times[group.slot], moved});
      if (height < best_height || (height == best_height && moved < best_moved)) {
        from = static_cast<int>(g);
        which = i;
        best_height = height;
        best_moved = moved;
      }
    }
  }
  if (from < 0) return false;
  Group& source = level.groups[static_cast<size_t>(from)];
  const Item* item = source.members[which];
  source.members.erase(source.members.begin() + static_cast<std::ptrdiff_t>(which));
  source.tokens -= item->length;
  source.time = group_time(source, source.slot);
  level.groups.push_back(Group{slot, size, item->length, item->times[slot], {item}});
  level.free -= size;
  recompute_height(level);
  return true;
}

/// Step 3's cover of the free ranks, one growth at a time: the growth that raises the height
/// least, ties to the smallest group, then the first. Each choice costs O(log groups) (a fall of
/// the height, rare, rebuilds the sets) where a scan of every group made a micro-batch of
/// thousands of groups cost O(groups²), which dominated planning on thousands of ranks.
/// Groups whose grown time keeps within the height all tie, by size and index; the others rank by
/// that time.
class GrowthChooser {
 public:
  GrowthChooser(Level& level, const PackContext& ctx) : level_(level), ctx_(ctx) { rebuild(); }

  /// Grows the chosen group; false when no group can grow into the free ranks.
  bool grow_one() {
    const int g = pick();
    if (g < 0) return false;
    Group& group = level_.groups[static_cast<size_t>(g)];
    times_.erase(times_.find(group.time));
    grow(level_, group, next_size(group.size, ctx_.options), ctx_.table);
    times_.insert(group.time);
    const double height = *times_.rbegin();
    if (height < level_.height) {  // the last of the slowest groups grew: every rank moves
      level_.height = height;
      rebuild();
      return true;
    }
    level_.height = height;
    while (!over_.empty() && over_.begin()->time <= height) {
      fits_.insert({over_.begin()->size, over_.begin()->group});
      over_.erase(over_.begin());
    }
    add(g);
    return true;
  }

  /// After groups changed otherwise (a sample moved onto the free ranks).
  void rebuild() {
    fits_.clear();
    over_.clear();
    times_.clear();
    for (const Group& g : level_.groups) times_.insert(g.time);
    level_.height = times_.empty() ? 0.0 : *times_.rbegin();
    for (size_t g = 0; g < level_.groups.size(); ++g) add(static_cast<int>(g));
  }

 private:
  struct Over {
    double time;  ///< the group's time at its next size
    int size;
    int group;
    bool operator<(const Over& o) const {
      return time < o.time ||
             (time == o.time && (size < o.size || (size == o.size && group < o.group)));
    }
  };

  void add(int g) {
    const Group& group = level_.groups[static_cast<size_t>(g)];
    const int size = next_size(group.size, ctx_.options);
    if (size == 0) return;
    const double grown = group_time(group, ctx_.table.slot_of(size));
    if (grown <= level_.height) {
      fits_.insert({group.size, g});
    } else {
      over_.insert({grown, group.size, g});
    }
  }

  bool fits_free_ranks(int g) const {
    const Group& group = level_.groups[static_cast<size_t>(g)];
    return next_size(group.size, ctx_.options) - group.size <= level_.free;
  }

  /// The group to grow, out of its set, or -1. Groups whose growth needs more ranks than are
  /// free leave for good (free ranks only run out).
  int pick() {
    while (!fits_.empty()) {
      const int g = fits_.begin()->second;
      fits_.erase(fits_.begin());
      if (fits_free_ranks(g)) return g;
    }
    while (!over_.empty()) {
      const int g = over_.begin()->group;
      over_.erase(over_.begin());
      if (fits_free_ranks(g)) return g;
    }
    return -1;
  }

  Level& level_;
  const PackContext& ctx_;
  std::set<std::pair<int, int>> fits_;  ///< (size, group) of those whose growth keeps the height
  std::set<Over> over_;                 ///< the others, by their grown time
  std::multiset<double> times_;         ///< every group's time
};

/// Step 3 for one micro-batch.
void spend_free_ranks(Level& level, const PackContext& ctx) {
  const ScheduleOptions& o = ctx.options;
  // Grow the slowest group while that lowers the height.
  while (level.free > 0) {
    auto slowest = std::max_element(level.groups.begin(), level.groups.end(),
                                    [](const Group& a, const Group& b) { return a.time < b.time; });
    const int size = next_size(slowest->size, o);
    if (size == 0 || size - slowest->size > level.free) break;
    const double t = group_time(*slowest, ctx.table.slot_of(size));
    double others = 0;
    for (const auto& g : level.groups) {
      if (&g != &*slowest) others = std::max(others, g.time);
    }
    if (std::max(others, t) >= level.height) break;
    grow(level, *slowest, size, ctx.table);
    recompute_height(level);
  }
  if (level.free == 0) return;
  // Cover the remaining free ranks with the growth that raises the height least.
  GrowthChooser chooser(level, ctx);
  while (level.free > 0) {
    if (chooser.grow_one()) continue;
    if (move_to_free_ranks(level, ctx)) {
      chooser.rebuild();
      continue;
    }
    // Nothing fits the free ranks: one group of all ranks (tokens <= M·G by construction).
    const int all_slot = ctx.table.slot_of(o.ranks());
    Group all{all_slot, o.ranks(), 0, 0.0, {}};
    for (auto& g : level.groups) {
      all.tokens += g.tokens;
      all.members.insert(all.members.end(), g.members.begin(), g.members.end());
    }
    all.time = group_time(all, all_slot);
    level.groups = {std::move(all)};
    level.free = 0;
    recompute_height(level);
    return;
  }
}

/// The CP size slot of `item` for a micro-batch of height `height`: the smallest allowed size
/// whose time fits, else the fastest.
int slot_for_height(const Item& item, double height) {
  int fastest = item.slots.front();
  for (const int s : item.slots) {
    const double t = item.times[s];
    if (t <= height) return s;
    if (t < item.times[fastest]) fastest = s;
  }
  return fastest;
}

/// The groups of one micro-batch that all finish by `height`, or nothing when the samples do not
/// fit. Samples come most costly first. A sample joins an existing group when one of an allowed
/// size has token room and time left for it (the least rank-time added, then the least time left
/// after it, then the oldest group): that time is spent anyway, while a new group takes ranks.
/// Otherwise it opens a group of the smallest allowed size that finishes in time. Groups are
/// indexed per size by time, so a sample looks at one candidate per size (plus those it skips for
/// lack of token room), not at every group.
std::optional<Level> pack_at_height(const std::vector<const Item*>& items, double height,
                                    const PackContext& ctx) {
  const ScheduleOptions& o = ctx.options;
  const int64_t m = o.max_seqlen_per_dp_cp_rank;
  Level level{{}, o.ranks(), 0.0};
  std::vector<SizeIndex>& by_size = ctx.by_size;
  for (auto& index : by_size) index.clear();
  int64_t shortest = std::numeric_limits<int64_t>::max();
  for (const Item* item : items) shortest = std::min(shortest, item->length);
  for (const Item* item : items) {
    const int fresh_slot = slot_for_height(*item, height);
    const int fresh = ctx.table.sizes[static_cast<size_t>(fresh_slot)];
    const double fresh_time = item->times[fresh_slot];
    const bool fresh_fits = fresh <= level.free && fresh_time <= height;
    int best = -1;
    double best_area = 0;
    double best_left = 0;
    for (int s = item->slots.front(); s < static_cast<int>(ctx.table.slots()); ++s) {
      auto& index = by_size[static_cast<size_t>(s)];
      if (index.empty()) continue;
      const int size = ctx.table.sizes[static_cast<size_t>(s)];
      const double t = item->times[s];
      const double area = size * t;
      if (best >= 0 && area > best_area) continue;
      const int64_t token_limit = m * size - item->length;
      // Largest time that leaves room for t, with slack for rounding; checked exactly below.
      auto it =
          std::upper_bound(index.begin(), index.end(), GroupKey{height - t + 1e-12 * height, -1});
      while (it != index.begin()) {
        --it;
        const Group& g = level.groups[static_cast<size_t>(it->group)];
        if (g.tokens > m * size - shortest) {  // full for every sample: leaves the index
          it = index.erase(it);
          continue;
        }
        const double left = height - g.time - t;
        if (left < 0 || g.tokens > token_limit) continue;
        if (best < 0 || area < best_area ||
            (area == best_area && (left < best_left || (left == best_left && it->group < best)))) {
          best = it->group;
          best_area = area;
          best_left = left;
        }
        break;
      }
    }
    if (best < 0) {
      if (!fresh_fits) return std::nullopt;
      level.free -= fresh;
      level.groups.push_back(Group{fresh_slot, fresh, 0, 0.0, {}});
      best = static_cast<int>(level.groups.size()) - 1;
    } else {
      auto& index = by_size[static_cast<size_t>(level.groups[static_cast<size_t>(best)].slot)];
      index.erase(std::lower_bound(index.begin(), index.end(),
                                   GroupKey{level.groups[static_cast<size_t>(best)].time, best}));
    }
    Group& g = level.groups[static_cast<size_t>(best)];
    g.tokens += item->length;
    g.time += item->times[g.slot];
    g.members.push_back(item);
    if (g.tokens <= m * g.size - shortest) {
      auto& index = by_size[static_cast<size_t>(g.slot)];
      const GroupKey key{g.time, best};
      index.insert(std::upper_bound(index.begin(), index.end(), key), key);
    }
  }
  recompute_height(level);
  spend_free_ranks(level, ctx);
  return level;
}

/// The height no packing of `items` goes below: their rank-time over all ranks, or the slowest
/// sample at its fastest size.
double height_bound(const std::vector<const Item*>& items, const ScheduleOptions& o) {
  double area = 0;
  double fastest_longest = 0;
  for (const Item* item : items) {
    area += item->area;
    double best = item->times[item->slots.front()];
    for (const int s : item->slots) best = std::min(best, item->times[s]);
    fastest_longest = std::max(fastest_longest, best);
  }
  return std::max(area / o.ranks(), fastest_longest);
}

/// The lowest height (to within kHeightTolerance) at which the micro-batch packs; empty when it
/// never does. Heights are probed upward from its `bound` (height_bound) in growing steps until
/// one packs (plans land close to the bound), then bisected between the last that failed and it.
std::optional<Level> pack_microbatch(const std::vector<const Item*>& items, double bound,
                                     const PackContext& ctx) {
  double slowest = 0;
  for (const Item* item : items) slowest += item->times[item->slots.front()];
  double lo = bound;
  double hi = std::max(lo, slowest);
  std::optional<Level> best;
  double* hint = ctx.last_height_over_bound;
  if (hint != nullptr && *hint > 1 && bound * *hint < hi) {
    // First the height the last micro-batch ended at (relative to its bound).
    best = pack_at_height(items, bound * *hint, ctx);
    if (best) {
      hi = bound * *hint;
    } else {
      lo = bound * *hint;
    }
  }
  if (!best && lo == bound) {
    if (auto at_lo = pack_at_height(items, lo, ctx)) return at_lo;
  }
  for (double step = 0.01; !best; step *= 3) {
    const double probe = lo * (1 + step);
    if (probe >= hi) {
      best = pack_at_height(items, hi, ctx);
      if (!best) return std::nullopt;
      break;
    }
    best = pack_at_height(items, probe, ctx);
    if (best) {
      hi = probe;
    } else {
      lo = probe;
    }
  }
  for (int step = 0; step < 40 && hi - lo > kHeightTolerance * lo; ++step) {
    const double mid = 0.5 * (lo + hi);
    if (auto level = pack_at_height(items, mid, ctx)) {
      hi = mid;
      if (level->height < best->height) best = std::move(level);
    } else {
      lo = mid;
    }
  }
  if (hint != nullptr) *hint = hi / bound;
  return best;
}

/// A micro-batch in the dealing order: least rank-time first, then the lowest index.
struct DealKey {
  double area;
  size_t index;
  bool operator<(const DealKey& o) const {
    return area < o.area || (area == o.area && index < o.index);
  }
};

/// All micro-batches for K of them: samples dealt, most rank-time first, to the micro-batch with
/// the least rank-time that has token room; then each packed at its lowest height. Empty when
/// one does not pack, or when their heights cannot sum to less than `give_up_at`. Micro-batches
/// wait in rank-time order; one leaves when no sample fits its token room. A sample counts for
/// `dealt_areas[its index in items]` when given (the rank-time a packing gave it), else for its
/// rank-time at the height the micro-batches aim for.
std::optional<std::vector<Level>> deal_and_pack(int64_t k, const std::vector<Item>& items,
                                                int64_t shortest, double give_up_at,
                                                const PackContext& ctx,
                                                const std::vector<double>* dealt_areas) {
  const ScheduleOptions& o = ctx.options;
  const int64_t room = o.max_seqlen_per_dp_cp_rank * o.ranks();
  std::vector<std::vector<const Item*>> members(static_cast<size_t>(k));
  std::vector<double> area(static_cast<size_t>(k), 0.0);
  std::vector<int64_t> tokens(static_cast<size_t>(k), 0);
  // A sample is dealt by the rank-time it will take at the height the micro-batches are aiming
  // for: the smallest size that finishes by then, else its fastest size. A long sample that only
  // fits such a height on all ranks thus fills its micro-batch rather than leaving room that the
  // others could only take by sharing its group.
  double total_area = 0;
  double fastest_longest = 0;
  for (const Item& item : items) {
    total_area += item.area;
    double fastest = item.times[item.slots.front()];
    for (const int s : item.slots) fastest = std::min(fastest, item.times[s]);
    fastest_longest = std::max(fastest_longest, fastest);
  }
  const double target =
      std::max(total_area / (static_cast<double>(k) * o.ranks()), fastest_longest);
  std::set<DealKey> open;
  for (size_t j = 0; j < members.size(); ++j) open.insert({0.0, j});
  for (const Item& item : items) {
    const int slot = slot_for_height(item, target);
    auto it = open.begin();
    while (it != open.end() && sum_exceeds(tokens[it->index], item.length, room)) ++it;
    if (it == open.end()) return std::nullopt;
    const size_t j = it->index;
    open.erase(it);
    members[j].push_back(&item);
    area[j] += dealt_areas ? (*dealt_areas)[static_cast<size_t>(&item - items.data())]
                           : ctx.table.sizes[static_cast<size_t>(slot)] * item.times[slot];
    tokens[j] += item.length;
    if (!sum_exceeds(tokens[j], shortest, room)) open.insert({area[j], j});
  }
  // Stop as soon as the heights so far and the bounds of the rest reach `give_up_at`: this K
  // cannot win then.
  std::vector<double> bounds(members.size());
  double still_bound = 0;
  for (size_t j = 0; j < members.size(); ++j) {
    if (members[j].empty()) return std::nullopt;
    bounds[j] = height_bound(members[j], o);
    still_bound += bounds[j];
  }
  std::vector<Level> levels;
  double heights = 0;
  for (size_t j = 0; j < members.size(); ++j) {
    still_bound -= bounds[j];
    auto level = pack_microbatch(members[j], bounds[j], ctx);
    if (!level) return std::nullopt;
    heights += level->height;
    if (heights + still_bound >= give_up_at) return std::nullopt;
    levels.push_back(std::move(*level));
  }
  return levels;
}

double total_height(const std::vector<Level>& levels) {
  double sum = 0;
  for (const auto& l : levels) sum += l.height;
  return sum;
}

/// `best`, K micro-batches of `items`, dealt again (up to kRedeals times) by the rank-time each
/// sample took in the best packing so far, while that lowers the step: the first dealing guesses
/// each sample's size from one height for all micro-batches, the packing knows it.
std::vector<Level> deal_again(std::vector<Level> best, int64_t k, const std::vector<Item>& items,
                              int64_t shortest, double give_up_at, const PackContext& ctx) {
  std::vector<double> taken(items.size());
  for (int round = 0; round < kRedeals; ++round) {
    for (const Level& level : best) {
      for (const Group& g : level.groups) {
        for (const Item* item : g.members) {
          taken[static_cast<size_t>(item - items.data())] = g.size * item->times[g.slot];
        }
      }
    }
    const double to_beat = std::min(give_up_at, total_height(best));
    auto again = deal_and_pack(k, items, shortest, to_beat, ctx, &taken);
    if (!again || total_height(*again) >= total_height(best)) break;
    best = std::move(*again);
  }
  return best;
}

/// deal_and_pack for K micro-batches, then deal_again where ctx.deal_again.
std::optional<std::vector<Level>> plan_with(int64_t k, const std::vector<Item>& items,
                                            int64_t shortest, double give_up_at,
                                            const PackContext& ctx) {
  auto best = deal_and_pack(k, items, shortest, give_up_at, ctx, nullptr);
  if (!best || !ctx.deal_again) return best;
  return deal_again(std::move(*best), k, items, shortest, give_up_at, ctx);
}

struct KSearchResult {
  std::vector<Level> levels;
  int64_t k;
};

/// Step 4: K from the token bound upward (in VPP multiples) to the first that packs, then on
/// while the step falls; the best plan and its K, or nothing when no K packs.
std::optional<KSearchResult> search_k(const std::vector<Item>& items, int64_t shortest,
                                      const PackContext& ctx) {
  const ScheduleOptions& o = ctx.options;
  const int64_t multiple = o.microbatch_multiple;
  const int64_t room = o.max_seqlen_per_dp_cp_rank * o.ranks();
  int64_t total_tokens = 0;
  for (const Item& item : items) total_tokens += item.length;
  int64_t k = round_up(total_tokens < 1 ? 1 : (total_tokens - 1) / room + 1, multiple);
  const auto n = static_cast<int64_t>(items.size());
  std::optional<KSearchResult> best;
  int64_t tries_after_first = 0;
  int64_t misses = 0;  // tries in a row that did not improve on the best
  double growth = kKGrowth;
  while (k <= n && (tries_after_first < kExtraKTries || misses < kKMisses)) {
    const double to_beat =
        best
            ? total_height(best->levels) *
                  (1 - kKMinGain * std::log2(static_cast<double>(k) / static_cast<double>(best->k)))
            : std::numeric_limits<double>::infinity();
    auto levels = plan_with(k, items, shortest, to_beat, ctx);
    if (best) ++tries_after_first;
    if (levels && (!best || total_height(*levels) < to_beat)) {
      best = KSearchResult{std::move(*levels), k};
      misses = 0;
      // Past the first tries, each K that lowers the step doubles the growth to the next.
      if (tries_after_first > kTriesAtKGrowth) growth = std::min(2 * growth, kMostKGrowth);
    } else if (best) {
      ++misses;
      growth = kKGrowth;
    }
    // Up to the first K that packs, one multiple at a time; after it, by `growth`.
    const auto grown = static_cast<int64_t>(std::ceil(static_cast<double>(k) * (1 + growth)));
    k = best ? std::max(k + multiple, round_up(grown, multiple)) : k + multiple;
  }
  return best;
}

/// The samples as the packer sees them, sorted by rank-time at their smallest size (largest
/// first, ids ascending on ties). Items point into `times` and `slot_lists`.
struct PackingItems {
  std::vector<double> times;    ///< every item's time on each SizeTable slot
  std::vector<int> slot_lists;  ///< every item's slots, one list after another
  std::vector<Item> items;
  int64_t shortest = std::numeric_limits<int64_t>::max();
};

PackingItems packing_items(std::span<const int64_t> ids, std::span<const int64_t> padded_lengths,
                           const ScheduleOptions& options, const SizeTable& table) {
  PackingItems out;
  out.times.resize(ids.size() * table.slots());
  out.items.resize(ids.size());
  std::vector<size_t> slot_list_end(ids.size());
  std::vector<int> sizes;
  int64_t total_tokens = 0;  // only checked for overflow here: search_k sums lengths unchecked
  for (size_t i = 0; i < ids.size(); ++i) {
    detail::candidate_cp_sizes(padded_lengths[i], options, sizes);
    if (sizes.empty()) {
      fail("balanced_dynamic_cp: sample ", ids[i], " has ", padded_lengths[i],
           " tokens, more than M x dp*cp = ", options.max_seqlen_per_dp_cp_rank * options.ranks(),
           "; ", kOversizeFix);
    }
    double* row = out.times.data() + i * table.slots();
    for (size_t s = 0; s < table.slots(); ++s) {
      row[s] = options.cost.time(padded_lengths[i], table.sizes[s]);
    }
    for (const int c : sizes) out.slot_lists.push_back(table.slot_of(c));
    slot_list_end[i] = out.slot_lists.size();
    const double area = sizes.front() * row[table.slot_of(sizes.front())];
    out.items[i] = {ids[i], padded_lengths[i], {}, area, row};
    total_tokens = checked_add(total_tokens, padded_lengths[i], "balanced_dynamic_cp total tokens");
    out.shortest = std::min(out.shortest, padded_lengths[i]);
  }
  for (size_t i = 0, begin = 0; i < out.items.size(); begin = slot_list_end[i++]) {
    out.items[i].slots =
        std::span<const int>(out.slot_lists).subspan(begin, slot_list_end[i] - begin);
  }
  std::sort(out.items.begin(), out.items.end(), [](const Item& a, const Item& b) {
    return a.area > b.area || (a.area == b.area && a.id < b.id);
  });
  return out;
}

/// Step 4 on every stride-th sample in rank-time order (the same mix of lengths), then one plan
/// of all samples at the K found, scaled; K grows by multiples until that plan packs. None when
/// the sample finds no K or no K tried packs.
std::optional<std::vector<Level>> plan_by_sampled_k(const PackingItems& all,
                                                    const PackContext& ctx) {
  const auto n = static_cast<int64_t>(all.items.size());
  const int64_t multiple = ctx.options.microbatch_multiple;
  const int64_t stride = n / kSampledKSearchAbove + 1;
  std::vector<Item> sample;
  int64_t sample_shortest = std::numeric_limits<int64_t>::max();
  for (int64_t i = 0; i < n; i += stride) {
    sample.push_back(all.items[static_cast<size_t>(i)]);
    sample_shortest = std::min(sample_shortest, sample.back().length);
  }
  PackContext searching = ctx;
  // The sample only picks K; dealing again costs more than it changes there.
  searching.deal_again = false;
  const auto sampled = search_k(sample, sample_shortest, searching);
  if (!sampled) return std::nullopt;
  const auto scaled =
      static_cast<int64_t>(std::ceil(static_cast<double>(sampled->k) * static_cast<double>(n) /
                                     static_cast<double>(sample.size())));
  const int64_t first = round_up(scaled, multiple);
  *ctx.last_height_over_bound = 0;  // the sample's micro-batches were smaller
  std::optional<std::vector<Level>> best;
  for (int64_t k = first; k <= n && k < first + kSampledKTries * multiple && !best; k += multiple) {
    best = plan_with(k, all.items, all.shortest, std::numeric_limits<double>::infinity(), ctx);
  }
  return best;
}

/// The levels as a draft plan: each micro-batch's groups from rank 0, larger groups first (the
/// layout Megatron's runtime expects: non-increasing sizes).
detail::DraftPlan draft_of(std::vector<Level>& levels, int ranks) {
  detail::DraftPlan plan;
  plan.ranks = ranks;
  for (auto& level : levels) {
    detail::DraftMicrobatch mb;
    int rank = 0;
    std::stable_sort(level.groups.begin(), level.groups.end(),
                     [](const Group& a, const Group& b) { return a.size > b.size; });
    for (auto& g : level.groups) {
      CpGroup group{rank, g.size, {}};
      group.ids.reserve(g.members.size());
      for (const Item* item : g.members) group.ids.push_back(item->id);
      mb.groups.push_back(std::move(group));
      rank += g.size;
    }
    plan.microbatches.push_back(std::move(mb));
  }
  return plan;
}

/// Steps 1-4: the plan of the packing above.
detail::DraftPlan plan_by_packing(std::span<const int64_t> ids,
                                  std::span<const int64_t> padded_lengths,
                                  const ScheduleOptions& options) {
  const SizeTable table = make_size_table(options);
  const PackingItems all = packing_items(ids, padded_lengths, options, table);
  const auto n = static_cast<int64_t>(all.items.size());
  std::vector<SizeIndex> by_size(table.slots());
  double height_over_bound = 0;  // where the next height search starts (0: at the bound)
  // Dealing again is for batches of at most kSampledKSearchAbove samples (step 3).
  const PackContext ctx{options, table, by_size, &height_over_bound, n <= kSampledKSearchAbove};

  std::optional<std::vector<Level>> best;
  if (n > kSampledKSearchAbove) best = plan_by_sampled_k(all, ctx);
  if (!best) {
    // Above kRedealEveryKUpTo samples, K is searched without dealing again and the K found is
    // dealt again once.
    PackContext searching = ctx;
    searching.deal_again = ctx.deal_again && n <= kRedealEveryKUpTo;
    if (auto searched = search_k(all.items, all.shortest, searching)) {
      best = ctx.deal_again && !searching.deal_again
                 ? deal_again(std::move(searched->levels), searched->k, all.items, all.shortest,
                              std::numeric_limits<double>::infinity(), ctx)
                 : std::move(searched->levels);
    }
  }
  if (!best) {
    fail("balanced_dynamic_cp: ", n, " samples cannot fill a multiple of the VPP group (",
         options.microbatch_multiple, ") of micro-batches; use a larger batch");
  }
  return draft_of(*best, options.ranks());
}

}  // namespace

Plan schedule_balanced_dynamic_cp(std::span<const int64_t> ids,
                                  std::span<const int64_t> padded_lengths,
                                  const ScheduleOptions& options) {
  validate_dynamic_cp_input(ids, padded_lengths, options);
  // A plan's modeled step: as its scheduler reported it, else (steps 1-4, a VPP split) summed.
  auto step_of = [&](const detail::ScoredPlan& scored) {
    return scored.step ? *scored.step
                       : detail::modeled_step(scored.plan, detail::LengthById(ids, padded_lengths),
                                              options.cost);
  };
  // The samples grouped by length, once for both planners (a pass over a large batch).
  const detail::LengthGroups by_length = detail::group_by_length(ids, padded_lengths);
  // Step 5 first: Megatron's plan (nothing for a batch Megatron cannot plan, a VPP split). Within
  // kNearBound of the lower bound no plan is faster by more, so it is kept without ours.
  std::optional<detail::ScoredPlan> theirs;
  double their_step = 0;
  try {
    theirs = detail::default_dynamic_cp_scored(by_length, options, &options.cost);
    their_step = step_of(*theirs);
  } catch (const InvalidArgument&) {
    // Megatron's VPP split failed: ours alone.
  }
  if (theirs &&
      their_step <= (1 + kNearBound) * detail::lower_bound(by_length, options, options.cost)) {
    return std::move(theirs->plan);
  }
  // Step 6 (declines batches under twice the template), else steps 1-4.
  std::optional<detail::TemplatePlan> by_template;
  try {
    by_template = detail::plan_by_template(
        by_length, options, template_samples(options),
        [](std::span<const int64_t> template_ids, std::span<const int64_t> template_lengths,
           const ScheduleOptions& template_options) {
          return detail::to_draft(
              schedule_balanced_dynamic_cp(template_ids, template_lengths, template_options));
        });
  } catch (const InvalidArgument&) {
    // The template's samples could not be planned (too few micro-batches for the VPP group):
    // plan all of them.
  }
  std::optional<detail::ScoredPlan> ours;
  if (!by_template) {
    try {
      ours = detail::ScoredPlan{
          detail::to_plan(plan_by_packing(ids, padded_lengths, options), options.dp, options.cp),
          {}};
    } catch (const InvalidArgument&) {
      // No micro-batch count in a VPP multiple packs: Megatron's plan, where its split made one.
      if (!theirs) throw;
      return std::move(theirs->plan);
    }
  }
  // Never slower than Megatron's plan under the same cost; on a tie, Megatron's plan, made
  // already (a template plan is built only where it is faster: samples that each fill their group
  // make one group per sample, whose building and freeing is a cost worth skipping).
  const double our_step = by_template ? by_template->step() : step_of(*ours);
  if (theirs && their_step <= our_step) return std::move(theirs->plan);
  return by_template ? detail::to_plan(by_template->build(by_length), options.dp, options.cp)
                     : std::move(ours->plan);
}

}  // namespace thdpack
