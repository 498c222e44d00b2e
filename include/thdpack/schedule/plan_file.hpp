#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Plans that travel (SPEC §11 "Plans"): one versioned JSON format for the plans of every scheduler,
// fixed or dynamic CP, so that a driver can plan from lengths and the ranks deliver what it planned
// (Pipeline::run_step with a PlannedBatch, which refuses a plan that does not match the step).
//
// A plan file, as `thdpack plan --plan-out` writes it:
//
//   {"format": "thdpack-plan-v2",
//    ...: fields about the run (workload, topology, cost model; informative, not read back),
//    "steps": [{"step": s,
//               "ids": [the step's global sample ids, DP-rank-major],
//               "plans": {"<scheduler>": <planned batch>, ...}}, ...]}
//
// A planned batch (also what planned_batch_json writes alone, then with the step's "ids" in it):
//
//   {"scheduler": "<name>", "layout": "fixed" | "dynamic" (the scheduler's CpLayout),
//    "dp": d, "cp": c,
//    "padded_lengths": [one per id of the step, as the scheduler saw them: padded to 2·cp with
//                       fixed CP, to 2·dp·cp with dynamic CP (× tp with sequence parallelism)],
//    "microbatches": [[{"first_rank": r, "size": n, "ids": [...]}, ...], ...]}
//
// Groups of a micro-batch are in rank order over the dp×cp ranks, their ids in pack order
// (plan.hpp). "layout" says which contracts hold: fixed CP (every micro-batch dp groups of size cp,
// packs of at most M·cp tokens) or dynamic CP (dynamic_cp.hpp).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "thdpack/schedule/plan.hpp"

namespace thdpack {

inline constexpr char kPlanFileFormat[] = "thdpack-plan-v2";

/// A plan with the samples it was made for: (id, padded length) in the order the scheduler saw
/// them (the gathered batch's order). What a driver hands to the ranks.
struct PlannedBatch {
  std::string scheduler;  ///< the scheduler that made the plan (scheduler.hpp)
  std::vector<int64_t> ids;
  std::vector<int64_t> padded_lengths;
  Plan plan;

  bool operator==(const PlannedBatch&) const = default;
};

/// One step of a plan file: its ids and the plan of each scheduler, in file order.
struct PlanFileStep {
  int64_t step = 0;
  std::vector<int64_t> ids;
  std::vector<std::pair<std::string, PlannedBatch>> plans;

  /// The planned batch of `scheduler`; throws InvalidArgument naming the schedulers the step has.
  const PlannedBatch& plan(const std::string& scheduler) const;
};

/// The JSON object of a planned batch (the format above), with its "ids".
std::string planned_batch_json(const PlannedBatch& planned);
/// The same without "ids", as a plan file's step holds it (the step lists the ids once).
std::string plan_json(const std::string& scheduler, const Plan& plan,
                      std::span<const int64_t> padded_lengths);
/// Reads planned_batch_json. Throws InvalidArgument saying what is malformed (not JSON, a field
/// missing or of the wrong type, sizes that disagree, dp or cp < 1, an unknown scheduler).
PlannedBatch planned_batch_from_json(std::string_view json);

/// Reads a plan file whole. Throws InvalidArgument naming the file and what is wrong: unreadable,
/// not JSON, another format or version, a malformed step or plan.
std::vector<PlanFileStep> read_plan_file(const std::string& path);

}  // namespace thdpack
