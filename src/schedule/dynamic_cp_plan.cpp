// Dynamic-CP plan helpers shared by every dynamic-CP scheduler: the smallest CP size of a sample,
// the group lookup and the contract check.

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>

#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/oversize_fix.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

int cp_min_for_length(int64_t length, int64_t max_seqlen_per_dp_cp_rank, int min_cp) {
  if (length < 1 || max_seqlen_per_dp_cp_rank < 1 || min_cp < 1) {
    throw InvalidArgument("cp_min_for_length: length, M and min_cp must be >= 1");
  }
  // Smallest power of two p with length <= p·M, i.e. L/p <= M.
  // ceil(L/p) as (L-1)/p + 1, which cannot overflow; p stays within int.
  int64_t p = 1;
  while ((length - 1) / p + 1 > max_seqlen_per_dp_cp_rank) {
    check(p <= std::numeric_limits<int>::max() / 2, "cp_min_for_length: a sample of ", length,
          " tokens needs more than ", p, " CP ranks at M = ", max_seqlen_per_dp_cp_rank);
    p *= 2;
  }
  return static_cast<int>(std::max<int64_t>(min_cp, p));
}

void validate_dynamic_cp_input(std::span<const int64_t> ids,
                               std::span<const int64_t> padded_lengths,
                               const ScheduleOptions& options) {
  if (options.dp < 1 || options.cp < 1 || options.microbatch_multiple < 1 || options.min_cp < 1) {
    throw InvalidArgument(
        "dynamic CP options: dp, cp, microbatch_multiple and min_cp must be >= 1");
  }
  const int64_t ranks = checked_mul(options.dp, options.cp, "dynamic CP dp*cp");
  check(ranks <= std::numeric_limits<int>::max(), "dynamic CP options: dp*cp = ", ranks,
        " does not fit in int");
  check(options.min_cp <= ranks, "dynamic CP options: min_cp (", options.min_cp,
        ") exceeds dp*cp (", ranks, "); no CP group can be that large");
  // The samples form one pool over all G ranks: validate them as one DP rank's.
  ScheduleOptions pool;
  pool.max_seqlen_per_dp_cp_rank = options.max_seqlen_per_dp_cp_rank;
  validate_schedule_input(ScheduleInput{ids, padded_lengths, {}, {}}, pool);
  // No sample may need more than all G ranks; this also bounds every M x (group size) product.
  const int64_t room =
      checked_mul(options.max_seqlen_per_dp_cp_rank, ranks, "dynamic CP capacity M x dp*cp");
  for (size_t i = 0; i < padded_lengths.size(); ++i) {
    check(padded_lengths[i] <= room, "dynamic CP: sample ", ids[i], " has ", padded_lengths[i],
          " tokens, more than M x dp*cp = ", room, "; ", kOversizeFix);
  }
}

bool allowed_cp_group_size(int size, const ScheduleOptions& o) {
  if (size == o.ranks()) return true;
  if (size < o.min_cp || size > o.ranks()) return false;
  for (int64_t c = 1; c <= size; c *= 2) {
    if (c == size || c * o.min_cp == size) return true;
  }
  return false;
}

namespace {

[[noreturn]] void violation(int64_t k, int64_t g, const std::string& what) {
  fail<InternalError>("dynamic CP plan: micro-batch ", k, ", group ", g, ": ", what);
}

}  // namespace

void check_dynamic_cp_plan(const Plan& plan, std::span<const int64_t> ids,
                           std::span<const int64_t> padded_lengths,
                           const ScheduleOptions& options) {
  const int ranks = options.ranks();
  check<InternalError>(plan.ranks() == ranks, "dynamic CP plan: covers ", plan.ranks(),
                       " ranks, expected dp*cp = ", ranks);
  check<InternalError>(plan.num_microbatches() % options.microbatch_multiple == 0,
                       "dynamic CP plan: ", plan.num_microbatches(),
                       " micro-batches are not a multiple of ", options.microbatch_multiple);
  std::unordered_map<int64_t, int64_t> length_of;
  length_of.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) length_of.emplace(ids[i], padded_lengths[i]);
  std::unordered_map<int64_t, int> seen;
  seen.reserve(ids.size());
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    const MicrobatchView mb = plan.microbatch(k);
    int next_rank = 0;
    for (int64_t g = 0; g < mb.size(); ++g) {
      const CpGroupView group = mb[g];
      if (group.first_rank != next_rank) violation(k, g, "does not start where the last ended");
      if (!allowed_cp_group_size(group.size, options)) {
        violation(k, g, message("size ", group.size, " is not an allowed CP size"));
      }
      if (group.ids.empty()) violation(k, g, "holds no sample");
      int64_t tokens = 0;
      for (const int64_t id : group.ids) {
        const auto it = length_of.find(id);
        if (it == length_of.end()) violation(k, g, message("unknown sample id ", id));
        if (++seen[id] > 1) violation(k, g, message("sample ", id, " scheduled twice"));
        tokens += it->second;
      }
      if (tokens > options.max_seqlen_per_dp_cp_rank * group.size) {
        violation(k, g, message(tokens, " tokens exceed M x group size"));
      }
      next_rank += group.size;
    }
    if (next_rank != ranks) {
      violation(k, mb.size(), message("groups cover ", next_rank, " of ", ranks, " ranks"));
    }
  }
  check<InternalError>(seen.size() == ids.size(), "dynamic CP plan: ", ids.size() - seen.size(),
                       " samples are not scheduled");
}

}  // namespace thdpack
