#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Dynamic context parallelism (SPEC §5): every micro-batch splits the G = dp·cp ranks of the
// dp_cp group into contiguous CP groups of their own size; each group runs its samples with
// context parallelism over its members. Short samples skip CP communication; long ones spread
// over many ranks.
//
// Contracts every dynamic-CP plan keeps (check_dynamic_cp_plan verifies them):
// - every input sample appears in exactly one group of exactly one micro-batch;
// - in every micro-batch the groups are contiguous rank ranges that cover [0, G) in order, each
//   non-empty;
// - a group of size c holds at most M·c tokens (padded lengths): each rank's share stays <= M;
// - the micro-batch count is a multiple of microbatch_multiple (the VPP group);
// - deterministic: the same input and options give a bit-identical plan.
// Plans are pure functions of the gathered lengths: no communication.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/plan.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

/// Smallest CP size a sample of `length` padded tokens needs: max(min_cp, 2^ceil(log2(L/M))),
/// computed exactly in integers. Requires length >= 1, M >= 1, min_cp >= 1.
int cp_min_for_length(int64_t length, int64_t max_seqlen_per_dp_cp_rank, int min_cp);

/// Megatron-LM's default_dynamic_cp scheduler (dev, packing-aware), reproduced exactly; the
/// rules, ties and orders are in docs/schedulers.md. Its time grows with about (samples +
/// micro-batches) × log(groups) (a tree of the groups per size), plus a search among the length
/// classes per class visited, not with samples × micro-batches as Megatron's does. `ids` and
/// `padded_lengths` have the same size (ids unique, lengths >= 1, usually padded to 2·dp·cp).
/// Throws InvalidArgument on bad input, when the longest sample needs more than G ranks, and in the
/// cases where Megatron itself fails (doubling that cannot cover G during the VPP split, no
/// micro-batch left to split).
Plan schedule_default_dynamic_cp(std::span<const int64_t> ids,
                                 std::span<const int64_t> padded_lengths,
                                 const ScheduleOptions& options);

/// Ours: chooses each sample's CP size, group and micro-batch together to minimise the modeled
/// step under options.cost, with the same contracts (docs/schedulers.md); never slower under it
/// than schedule_default_dynamic_cp's plan, which it makes first and returns as it is when its
/// modeled step is within 0.25% of the lower bound. One thread.
Plan schedule_balanced_dynamic_cp(std::span<const int64_t> ids,
                                  std::span<const int64_t> padded_lengths,
                                  const ScheduleOptions& options);

/// True when a group of `size` ranks is one a dynamic-CP plan may use: G itself, or a power of
/// two, or min_cp times a power of two, at most G.
bool allowed_cp_group_size(int size, const ScheduleOptions& options);

/// The statistics (plan_stats.hpp) of a dynamic-CP plan under `cost`: num_samples,
/// num_microbatches, num_groups, step_cost, step_lower_bound and step_ratio; the other fields are
/// those of fixed CP and stay 0. A micro-batch lasts as long as its slowest group (groups change
/// between micro-batches, so ranks meet at every micro-batch); the step is the sum over
/// micro-batches. The lower bound is max(Σ over samples of the smallest rank-time a sample can
/// occupy / G, the largest single-sample time at its best allowed size).
PlanStats evaluate_dynamic_cp_plan(const Plan& plan, std::span<const int64_t> ids,
                                   std::span<const int64_t> padded_lengths,
                                   const ScheduleOptions& options, const CostModel& cost);

/// The modeled step of a fixed-CP plan (scheduler.hpp) under the same cost: every pack runs on a
/// group of `cp` ranks; replicas do not meet between micro-batches, so the step is the slowest
/// replica's sum. Comparable with evaluate_dynamic_cp_plan's step_cost for the same samples.
/// A lower bound on fixed_cp_modeled_step for any fixed-CP plan of these samples: every sample
/// runs on one replica's cp ranks, so the slowest replica takes at least the mean,
/// Σ cost.time(L, cp) / dp, and at least the longest single sample. (The dynamic-CP lower bound of
/// evaluate_dynamic_cp_plan is no bound for fixed CP: it counts the dynamic divisor's padding and
/// group sizes.)
double fixed_cp_step_lower_bound(std::span<const int64_t> padded_lengths, int dp, int cp,
                                 const CostModel& cost);

double fixed_cp_modeled_step(const Plan& plan, std::span<const int64_t> ids,
                             std::span<const int64_t> padded_lengths, int cp,
                             const CostModel& cost);

/// Checks options (dp, cp, microbatch_multiple, min_cp >= 1, M >= 1) and input (same sizes,
/// lengths >= 1, unique ids); throws InvalidArgument. Every dynamic-CP scheduler calls it first.
void validate_dynamic_cp_input(std::span<const int64_t> ids,
                               std::span<const int64_t> padded_lengths,
                               const ScheduleOptions& options);

/// Verifies the contracts above for `plan` against the input it was made from; throws
/// InternalError naming the micro-batch and group of the first violation.
void check_dynamic_cp_plan(const Plan& plan, std::span<const int64_t> ids,
                           std::span<const int64_t> padded_lengths, const ScheduleOptions& options);

}  // namespace thdpack
