// "dp_balanced": Megatron-LM's DpBalancedScheduler, reproduced exactly (SPEC §5).
//
// Next-fit in global order with capacity C; then, while the pack count is not a multiple of
// dp·(vpp group), walk back from the last original pack and pop the last id of the nearest pack
// holding more than one sample into a new single-sample pack at the end. Pack j goes to replica
// j mod dp in micro-batch j div dp. Two deliberate differences, both where Megatron fails:
// a sample longer than C is rejected (Megatron emits an empty first pack), and running out of
// samples to split is a clear error (Megatron asserts, and never splits pack 0; we may).

#include <string>

#include "schedule/schedulers.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack::detail {

std::string DpBalancedScheduler::description() const {
  return "Megatron-LM's dp_balanced: next-fit in global order, tail split to a multiple of "
         "dp x vpp group; balances micro-batch counts only";
}

Plan DpBalancedScheduler::schedule(const ScheduleInput& input,
                                   const ScheduleOptions& options) const {
  validate_schedule_input(input, options);
  if (!input.group_ids.empty()) {
    throw InvalidArgument(
        "dp_balanced does not support group-atomic packing; use balanced or local");
  }
  const int64_t capacity = options.capacity();
  check_items_fit(input.padded_lengths, capacity, "sample");

  std::vector<std::vector<int64_t>> packs;
  int64_t used = 0;
  // thd_max_packed_sequences: a full pack closes like one without room (0: no cap).
  const auto cap = options.max_sequences_per_pack > 0
                       ? static_cast<size_t>(options.max_sequences_per_pack)
                       : static_cast<size_t>(-1);
  for (size_t i = 0; i < input.ids.size(); ++i) {
    const int64_t len = input.padded_lengths[i];
    if (packs.empty() || used + len > capacity || packs.back().size() == cap) {
      packs.emplace_back();
      used = 0;
    }
    packs.back().push_back(input.ids[i]);
    used += len;
  }

  const int64_t multiple = static_cast<int64_t>(options.dp) * options.microbatch_multiple;
  const auto original = static_cast<int64_t>(packs.size());
  int64_t to_move = (multiple - original % multiple) % multiple;
  int64_t i = original - 1;
  while (to_move > 0) {
    check(i >= 0, "dp_balanced: ", input.ids.size(), " samples in ", original,
          " packs cannot be split into a multiple of dp x vpp group = ", multiple,
          " packs; use a larger global batch or the balanced scheduler");
    auto& pack = packs[static_cast<size_t>(i)];
    if (pack.size() > 1) {
      const int64_t id = pack.back();
      pack.pop_back();
      packs.push_back({id});
      --to_move;
    } else {
      --i;
    }
  }
  return Plan(options.dp, options.cp, packs);
}

}  // namespace thdpack::detail
