#pragma once
// Steps 2-4 of a pipeline step under a dynamic-CP scheduler (pipeline.hpp): every rank computes
// the same dynamic-CP plan and, for every micro-batch, the zigzag slice of its CP group's pack;
// rows travel in one alltoallv over the world from the reader of the sample's DP index with the
// receiver's CP, TP and PP coordinates, then (Megatron mode) by the TP broadcast.

#include <cstdint>
#include <span>

#include "sample_exchange.hpp"
#include "thdpack/comm/communicator.hpp"
#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack::detail {

/// Refuses what dynamic CP does not support (static shapes, the sequence cap, contiguous CP):
/// throws InvalidArgument naming the option.
void check_dynamic_cp_pipeline_options(const PipelineOptions& options);

/// For result.plan (already made), fills result.cp_groups and result.microbatches for
/// `result.batch` (already gathered). Collective over `world` (one alltoallv, on every rank) and,
/// in Megatron mode on ranks whose stage holds rows, over `tp_group` (one broadcast).
void deliver_dynamic_cp(StepResult& result, Communicator& world, Communicator& tp_group,
                        const PipelineOptions& options, bool reader, StageFields fields,
                        const PackOptions& pack, std::span<const SampleView> local_samples,
                        ExchangeBuffers& buffers);

/// minimum_exchange_bytes of a dynamic-CP step: every member of a sample's group that is not on
/// the sample's DP index receives its slice.
int64_t dynamic_cp_minimum_exchange_bytes(const StepResult& result, const PipelineOptions& options);

}  // namespace thdpack::detail
