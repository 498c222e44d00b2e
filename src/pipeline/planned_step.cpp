// Plans made elsewhere: checked against the step before any rank delivers them.

#include "pipeline/planned_step.hpp"

#include <string>

#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/plan_stats.hpp"

namespace thdpack {

namespace detail {

void check_group_slicing(const Plan& plan, int64_t divisor) {
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    for (const CpGroupView g : plan.microbatch(k)) {
      if (g.size > 1 && divisor % (2 * g.size) != 0) {
        fail("micro-batch ", k, " has a CP group of ", g.size,
             " ranks, which cannot zigzag-slice samples padded to ", divisor,
             " (the padding divisor)");
      }
    }
  }
}

namespace {

uint64_t digest_of(const PlannedBatch& planned) {
  Hash64 h;
  h.add_all(std::span<const char>(planned.scheduler))
      .add_all(std::span<const int64_t>(planned.ids))
      .add_all(std::span<const int64_t>(planned.padded_lengths));
  const Plan& plan = planned.plan;
  h.add(plan.dp()).add(plan.cp()).add(plan.num_microbatches());
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    for (const CpGroupView g : plan.microbatch(k)) {
      h.add(k).add(g.first_rank).add(g.size).add_all(g.ids);
    }
  }
  return h.digest();
}

}  // namespace

Plan agreed_plan(Communicator& world, const PlannedBatch& planned, const GlobalBatch& batch,
                 const PipelineOptions& options) {
  std::string refusal;
  try {
    check_planned_batch(planned, batch, options);
  } catch (const Error& e) {
    refusal = e.what();
  }
  // Digests agree when max(d) == -max(-d); a refusal anywhere raises the first value.
  const auto digest = static_cast<int64_t>(digest_of(planned) >> 1);
  int64_t votes[] = {refusal.empty() ? 0 : 1, digest, -digest};
  world.allreduce(votes, ReduceOp::kMax);
  if (!refusal.empty()) fail("the given plan does not fit this step: ", refusal);
  if (votes[0] != 0) {
    throw InvalidArgument("another rank refused the given plan (it does not fit the step there)");
  }
  if (votes[1] != -votes[2]) {
    throw InvalidArgument(
        "the ranks were given different plans for this step; give every rank "
        "the same planned batch");
  }
  return planned.plan;
}

}  // namespace detail

void check_planned_batch(const PlannedBatch& planned, const GlobalBatch& batch,
                         const PipelineOptions& options) {
  const Topology& t = options.topology;
  const Plan& plan = planned.plan;
  const CpLayout layout = scheduler_layout(planned.scheduler);
  if (layout != scheduler_layout(options.scheduler)) {
    auto name = [](CpLayout l) { return l == CpLayout::kFixed ? "fixed" : "dynamic"; };
    fail("the plan was made by ", planned.scheduler, " (", name(layout),
         " CP); this job's scheduler ", options.scheduler, " runs ",
         name(scheduler_layout(options.scheduler)), " CP");
  }
  if (plan.dp() != t.dp() || plan.cp() != t.cp()) {
    fail("the plan is laid out for dp=", plan.dp(), " cp=", plan.cp(), ", the job has dp=", t.dp(),
         " cp=", t.cp());
  }
  if (planned.ids.size() != batch.ids.size() ||
      planned.padded_lengths.size() != planned.ids.size()) {
    fail("the plan was made for ", planned.ids.size(), " samples, this step has ",
         batch.ids.size());
  }
  for (size_t i = 0; i < batch.ids.size(); ++i) {
    check(planned.ids[i] == batch.ids[i], "sample ", i, " of this step is id ", batch.ids[i],
          ", the plan's is id ", planned.ids[i], " (a plan of other data or order)");
    check(planned.padded_lengths[i] == batch.padded_lengths[i], "sample ", batch.ids[i], " has ",
          batch.padded_lengths[i], " padded tokens in this step but ", planned.padded_lengths[i],
          " in the plan (other data, or padding for another scheduler layout, "
          "cp or sequence parallelism)");
  }
  try {
    if (uses_dynamic_cp(options)) {
      if (!batch.group_ids.empty()) {
        fail("scheduler ", options.scheduler,
             " does not keep groups of samples together; give no group ids");
      }
      check_dynamic_cp_plan(plan, batch.ids, batch.padded_lengths, schedule_options_of(options));
    } else {
      validate_plan(
          plan,
          ScheduleInput{batch.ids, batch.padded_lengths, batch.samples_per_rank, batch.group_ids},
          schedule_options_of(options));
    }
  } catch (const InternalError& e) {
    throw InvalidArgument(e.what());
  }
  detail::check_group_slicing(plan, pack_options_of(options).divisor);
}

}  // namespace thdpack
