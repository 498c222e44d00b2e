#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "schedule/dense_id_range.hpp"
#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {
namespace {

[[noreturn]] void duplicate_id(int64_t id) {
  fail("schedule input: sample id ", id, " appears twice");
}

// Ids are usually a dense range (dataset indices of one global batch): a bitmap over the range
// checks them in O(n); sparse ids fall back to sorting a copy.
void check_unique_ids(std::span<const int64_t> ids) {
  if (const auto range = detail::dense_id_range(ids)) {
    std::vector<uint8_t> seen(range->slots, 0);
    for (int64_t id : ids) {
      uint8_t& slot = seen[range->offset(id)];
      if (slot) duplicate_id(id);
      slot = 1;
    }
    return;
  }
  std::vector<int64_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) duplicate_id(*dup);
}

}  // namespace

ScheduleOptions ScheduleOptions::from_topology(const Topology& topology,
                                               int64_t max_seqlen_per_dp_cp_rank,
                                               const CostModel& cost) {
  ScheduleOptions o;
  o.dp = topology.dp();
  o.cp = topology.cp();
  o.pp = topology.pp();
  o.microbatch_multiple = topology.microbatch_multiple();
  o.max_seqlen_per_dp_cp_rank = max_seqlen_per_dp_cp_rank;
  o.cost = cost;
  return o;
}

void validate_schedule_input(const ScheduleInput& in, const ScheduleOptions& o) {
  if (o.dp < 1 || o.cp < 1 || o.pp < 1 || o.microbatch_multiple < 1) {
    throw InvalidArgument("schedule options: dp, cp, pp and microbatch_multiple must be >= 1");
  }
  check(o.max_sequences_per_pack >= 0,
        "max_sequences_per_pack (thd_max_packed_sequences) must be >= 0, got ",
        o.max_sequences_per_pack);
  if (o.max_sequences_per_pack > 0 && !in.group_ids.empty()) {
    throw InvalidArgument(
        "max_sequences_per_pack (thd_max_packed_sequences) cannot be combined with group ids");
  }
  check(o.max_seqlen_per_dp_cp_rank >= 1, "max_seqlen_per_dp_cp_rank must be >= 1, got ",
        o.max_seqlen_per_dp_cp_rank);
  check(in.ids.size() == in.padded_lengths.size(), "schedule input: ", in.ids.size(), " ids but ",
        in.padded_lengths.size(), " lengths");
  if (!in.group_ids.empty() && in.group_ids.size() != in.ids.size()) {
    throw InvalidArgument("schedule input: group_ids must be empty or one per sample");
  }
  if (!in.samples_per_rank.empty()) {
    check(static_cast<int>(in.samples_per_rank.size()) == o.dp,
          "schedule input: samples_per_rank has ", in.samples_per_rank.size(),
          " entries for dp=", o.dp);
    int64_t sum = 0;
    for (int64_t c : in.samples_per_rank) {
      if (c < 0) throw InvalidArgument("schedule input: negative samples_per_rank entry");
      sum += c;
    }
    check(sum == static_cast<int64_t>(in.ids.size()), "schedule input: samples_per_rank sums to ",
          sum, " but there are ", in.ids.size(), " samples");
  } else if (in.ids.size() % static_cast<size_t>(o.dp) != 0) {
    fail("schedule input: ", in.ids.size(), " samples do not split equally over dp=", o.dp,
         "; pass samples_per_rank");
  }
  checked_mul(o.max_seqlen_per_dp_cp_rank, o.cp, "capacity max_seqlen_per_dp_cp_rank x cp");
  checked_mul(o.dp, o.microbatch_multiple, "dp x microbatch_multiple");
  // With the total in range, no sum of some of the lengths (a pack, a replica) can overflow.
  int64_t total = 0;
  for (size_t i = 0; i < in.padded_lengths.size(); ++i) {
    check(in.padded_lengths[i] >= 1, "sample ", in.ids[i], " has length ", in.padded_lengths[i],
          "; lengths must be >= 1");
    total = checked_add(total, in.padded_lengths[i], "schedule input: the sum of the lengths");
  }
  check_unique_ids(in.ids);
  const int64_t needed = static_cast<int64_t>(o.dp) * o.microbatch_multiple;
  check(static_cast<int64_t>(in.ids.size()) >= needed, "global batch of ", in.ids.size(),
        " samples is smaller than dp x vpp group = ", needed,
        ": every replica needs at least that many non-empty micro-batches");
}

}  // namespace thdpack
