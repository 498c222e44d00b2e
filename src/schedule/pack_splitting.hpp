#pragma once
// Splitting packs of a plan: how "local" evens out micro-batch counts, and how a cap on the samples
// of one pack (ScheduleOptions::max_sequences_per_pack) is kept by the schedulers that do not
// build it into their packing.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::detail {

/// Splits `packs` until there are `target`: each time the pack with the most entries (ties: the
/// most tokens by `length_of`, then the lowest index) gives its last entry to a new pack at the
/// end. Returns false, with the packs split so far, when no pack has two entries left.
bool split_packs_to(std::vector<std::vector<int64_t>>& packs, int64_t target,
                    const std::function<int64_t(int64_t)>& length_of);

/// One replica's packs of items (an item: input positions that stay in one pack) split until there
/// are `target`: the last item of the costliest pack holding two or more goes to a new pack, right
/// after it when the item is a run's (`in_run` of its first position: the samples of a group over
/// the capacity, whose packs stay consecutive), else at the end. `cost`: each input position's
/// cost. Returns each pack's positions, increasing: fewer than `target` packs when no pack had two
/// items left.
std::vector<std::vector<int64_t>> split_item_packs_to(
    std::vector<std::vector<std::vector<int64_t>>> packs, int64_t target,
    std::span<const double> cost, std::span<const char> in_run);

/// Whether cap_sequences_per_pack may give a pack to another DP replica.
enum class PackMoves { kAllowed, kNone };

/// `plan` with at most options.max_sequences_per_pack ids in every pack (the plan itself when the
/// cap is 0 or already kept): each over-full pack is cut into runs of the cap in its order; K is
/// the largest per-replica count (kNone) or the count that spreads all packs evenly (kAllowed:
/// replicas over K give their packs with the fewest tokens to the replicas short of K with the
/// fewest tokens); K is rounded up to options.microbatch_multiple and every replica's packs are
/// split until it has K. Token capacity is kept (packs only lose samples). Throws InvalidArgument
/// naming the replica when it has too few samples for K.
Plan cap_sequences_per_pack(Plan plan, const ScheduleInput& input, const ScheduleOptions& options,
                            PackMoves moves);

}  // namespace thdpack::detail
