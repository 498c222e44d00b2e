// "local": no data moves between DP ranks. Each rank packs its own samples (best-fit decreasing);
// then every rank splits packs until it has the largest count (rounded up to the VPP multiple).
// In a distributed run the only communication this needs is an allreduce(max) of the count.

#include <algorithm>
#include <string>

#include "schedule/pack_splitting.hpp"
#include "schedule/schedule_items.hpp"
#include "schedule/schedulers.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack::detail {
namespace {

// Splits packs until there are `target` (see split_packs_to).
void split_to(std::vector<std::vector<int64_t>>& packs, int64_t target, const ScheduleItems& items,
              int rank) {
  const auto length_of = [&items](int64_t item) {
    return items.lengths[static_cast<size_t>(item)];
  };
  if (!split_packs_to(packs, target, length_of)) {
    fail("local scheduler: DP rank ", rank, " holds ", packs.size(),
         " samples/groups but every rank needs ", target,
         " micro-batches; give it more samples or use the balanced scheduler");
  }
}

}  // namespace

std::string LocalScheduler::description() const {
  return "no exchange: each DP rank packs its own samples (best-fit decreasing), counts "
         "equalised by splitting packs";
}

Plan LocalScheduler::schedule(const ScheduleInput& input, const ScheduleOptions& options) const {
  validate_schedule_input(input, options);
  const ScheduleItems items = build_items(input, options, /*same_rank_groups=*/true);
  const int dp = options.dp;

  std::vector<std::vector<int64_t>> rank_items(static_cast<size_t>(dp));
  for (int64_t i = 0; i < items.size(); ++i) {
    rank_items[static_cast<size_t>(items.source_rank[static_cast<size_t>(i)])].push_back(i);
  }
  std::vector<std::vector<std::vector<int64_t>>> bins(static_cast<size_t>(dp));
  int64_t k = 0;
  for (int r = 0; r < dp; ++r) {
    const auto& mine = rank_items[static_cast<size_t>(r)];
    std::vector<int64_t> lengths;
    lengths.reserve(mine.size());
    for (int64_t item : mine) lengths.push_back(items.lengths[static_cast<size_t>(item)]);
    const Bins packed = best_fit_decreasing(lengths, options.capacity());
    auto& out = bins[static_cast<size_t>(r)];
    for (int64_t p = 0; p < packed.count(); ++p) {
      std::vector<int64_t> pack;
      for (int64_t local : packed.bin(p)) pack.push_back(mine[static_cast<size_t>(local)]);
      out.push_back(std::move(pack));
    }
    k = std::max(k, packed.count());
  }
  k = round_up_to(std::max<int64_t>(k, 1), options.microbatch_multiple);
  for (int r = 0; r < dp; ++r) split_to(bins[static_cast<size_t>(r)], k, items, r);
  PackLists packs;
  for (int64_t step = 0; step < k; ++step) {
    for (int r = 0; r < dp; ++r) {
      const auto& pack = bins[static_cast<size_t>(r)][static_cast<size_t>(step)];
      packs.items.insert(packs.items.end(), pack.begin(), pack.end());
      packs.offsets.push_back(static_cast<int64_t>(packs.items.size()));
    }
  }
  return cap_sequences_per_pack(plan_from_packs(dp, options.cp, packs, items, input), input,
                                options, PackMoves::kNone);
}

}  // namespace thdpack::detail
