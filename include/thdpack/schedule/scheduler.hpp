#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Schedulers (SPEC §5): which samples of a global batch go into which micro-batch on which
// data-parallel replica.
//
// One interface for every scheduler, fixed and dynamic CP (make_scheduler; the dynamic-CP ones and
// their contracts are in dynamic_cp.hpp). Input: the global list of (global id, padded length) in
// DP-rank-major order (DP rank 0's samples in its local order, then rank 1's, ...). Output: a Plan
// (plan.hpp). A fixed-CP scheduler's plan gives, for every micro-batch step k and every DP replica,
// the ordered global ids of its pack (pack(k, r)). Contracts every fixed-CP scheduler keeps:
// - every input sample appears in exactly one pack; no pack is empty;
// - every replica gets the same number of micro-batches K, a multiple of the topology's
//   microbatch_multiple() (the VPP group with virtual pipelining);
// - every pack holds at most C = max_seqlen_per_dp_cp_rank · cp tokens (padded lengths); a sample
//   longer than C is an InvalidArgument, and so is a group longer than C except with "balanced",
//   which keeps such a group on one replica over consecutive micro-batches;
// - with max_sequences_per_pack > 0, no pack holds more samples than that;
// - deterministic: the same input and options give a bit-identical plan, on every rank and run.
//
// Schedulers are pure: no communication. Every rank of a job computes the same plan from the same
// gathered lengths, so plans need not be sent (a plan made elsewhere can be: plan_file.hpp).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "thdpack/core/topology.hpp"
#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/plan.hpp"

namespace thdpack {

/// The lengths a scheduler sees. Spans are borrowed for the duration of the call.
struct ScheduleInput {
  std::span<const int64_t> ids;             ///< global sample ids, unique, DP-rank-major
  std::span<const int64_t> padded_lengths;  ///< same size; each >= 1
  /// Samples held by each DP rank (size dp, sums to ids.size()); the first samples_per_rank[0] ids
  /// are rank 0's, and so on. Empty means an equal split. Only "local" depends on it.
  std::span<const int64_t> samples_per_rank;
  /// Optional (empty or same size): samples with the same group id are kept in one pack, e.g. GRPO
  /// groups or preference pairs. Supported by "balanced" and "local". With "balanced", a group
  /// longer than one pack goes to consecutive packs of one replica instead.
  std::span<const int64_t> group_ids;
};

struct ScheduleOptions {
  int dp = 1;
  int cp = 1;
  int pp = 1;
  /// K must be a multiple of this (Topology::microbatch_multiple()).
  int microbatch_multiple = 1;
  /// M: token budget of one micro-batch on one DP×CP rank; packs hold at most M·cp tokens.
  int64_t max_seqlen_per_dp_cp_rank = 0;
  /// What a sample costs, for workload-aware schedulers and plan statistics: fixed-CP schedulers
  /// balance cost(L); dynamic-CP ones take time(L, c) on a group of c ranks (default_dynamic_cp
  /// ignores it: Megatron's L²/c). The front ends give a dynamic-CP scheduler the CP cost model
  /// (CostModel::of_preset_or_coefficients: with a model preset, FLOPs plus ring communication).
  CostModel cost;
  /// If > 0, a hard cap on the samples of one pack (Megatron's thd_max_packed_sequences; static
  /// cu_seqlens shapes). dp_balanced closes a pack when it is full; balanced and local split packs
  /// over the cap and then even out the micro-batch counts. Not with group ids.
  int64_t max_sequences_per_pack = 0;
  /// Dynamic-CP schedulers only: the smallest CP group a sample may use (Megatron's min_cp_size).
  int min_cp = 1;

  /// dp, cp, pp and microbatch_multiple from a topology.
  static ScheduleOptions from_topology(const Topology& topology, int64_t max_seqlen_per_dp_cp_rank,
                                       const CostModel& cost);
  /// C = M · cp.
  int64_t capacity() const { return max_seqlen_per_dp_cp_rank * cp; }
  /// G = dp·cp: the ranks a dynamic-CP micro-batch divides into CP groups.
  int ranks() const { return dp * cp; }
};

/// How a scheduler's plans use the dp×cp ranks (plan.hpp): fixed CP (every micro-batch dp groups
/// of size cp; samples padded to 2·cp) or dynamic CP (groups of their own sizes over all dp·cp
/// ranks; samples padded to 2·dp·cp, one sample up to M·dp·cp tokens).
enum class CpLayout { kFixed, kDynamic };

/// The scheduler interface, one for all schedulers; implementations are stateless and thread-safe.
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::string name() const = 0;
  virtual CpLayout layout() const = 0;
  /// One line for --help and docs.
  virtual std::string description() const = 0;
  /// Computes the plan. Throws InvalidArgument on bad input (see the contracts above) and when no
  /// valid plan exists (too few samples for dp·K non-empty packs).
  virtual Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const = 0;
};

/// Names in the registry: "balanced", "dp_balanced", "local" (fixed CP), "default_dynamic_cp",
/// "balanced_dynamic_cp" (dynamic CP, dynamic_cp.hpp).
std::vector<std::string> scheduler_names();
/// The names of the schedulers of one layout, in registry order.
std::vector<std::string> scheduler_names(CpLayout layout);
/// The layout of scheduler `name`; throws InvalidArgument listing the names when unknown.
CpLayout scheduler_layout(const std::string& name);
/// A scheduler by name; throws InvalidArgument listing the names when unknown.
std::unique_ptr<Scheduler> make_scheduler(const std::string& name);

/// Checks the input against the options (sizes, lengths >= 1, unique ids, samples_per_rank,
/// group ids, dp/cp/pp/multiple >= 1, M >= 1). Every scheduler calls it first.
void validate_schedule_input(const ScheduleInput& input, const ScheduleOptions& options);

}  // namespace thdpack
