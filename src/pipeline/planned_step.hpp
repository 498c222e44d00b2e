#pragma once
// A step that delivers a plan made elsewhere (Pipeline::run_planned_step).

#include "thdpack/comm/communicator.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/schedule/plan_file.hpp"

namespace thdpack::detail {

/// planned.plan once every rank has checked it against the gathered `batch`
/// (check_planned_batch) and found the same plan as the others. Collective over `world` (one
/// allreduce of three integers). Throws InvalidArgument on every rank when any rank refused the
/// plan or the ranks were given different plans.
Plan agreed_plan(Communicator& world, const PlannedBatch& planned, const GlobalBatch& batch,
                 const PipelineOptions& options);

/// Throws InvalidArgument when a group of more than one rank cannot zigzag-slice samples padded
/// to `divisor` (a multiple of 2·size is needed), naming the micro-batch and the group size.
void check_group_slicing(const Plan& plan, int64_t divisor);

}  // namespace thdpack::detail
