#include <sstream>

#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack {

std::string PipelineOptions::describe() const {
  std::ostringstream out;
  const TopologyConfig& t = topology.config();
  out.precision(17);
  out << "tp=" << t.tp << " cp=" << t.cp << " dp=" << t.dp << " pp=" << t.pp << " ep=" << t.ep
      << " vpp=" << t.vpp << " vpp_group=" << topology.microbatch_multiple() << " order=" << t.order
      << " max_seqlen_per_dp_cp_rank=" << max_seqlen_per_dp_cp_rank << " scheduler=" << scheduler
      << " cost=" << cost.linear << "," << cost.quadratic
      << " reading=" << (reading == ReadingMode::kMegatron ? "megatron" : "all-ranks")
      << " sequence_parallel=" << sequence_parallel
      << " cp_mode=" << (cp_mode == CpMode::kZigzag ? "zigzag" : "contiguous")
      << " oversize=" << (oversize == OversizePolicy::kError ? "error" : "truncate")
      << " pad_id=" << pad_id << " ignore_id=" << ignore_id
      << " pad_positions=" << (pad_positions == PadPositions::kContinue ? "continue" : "zero");
  return out.str();
}

StageFields stage_fields(const Topology& topology, int pp_rank) {
  return StageFields{pp_rank == 0, pp_rank == topology.pp() - 1};
}

StageFields virtual_stage_fields(const Topology& topology, int pp_rank, int virtual_stage) {
  if (virtual_stage < 0 || virtual_stage >= topology.vpp()) {
    throw InvalidArgument("virtual stage " + std::to_string(virtual_stage) + " outside [0, " +
                          std::to_string(topology.vpp()) + ")");
  }
  return StageFields{pp_rank == 0 && virtual_stage == 0,
                     pp_rank == topology.pp() - 1 && virtual_stage == topology.vpp() - 1};
}

bool reads_data(const Topology& topology, ReadingMode mode, int rank) {
  if (mode == ReadingMode::kAllRanks) return true;
  const Coordinates c = topology.coordinates(rank);
  return c.tp == 0 && (c.pp == 0 || c.pp == topology.pp() - 1);
}

PackOptions pack_options_of(const PipelineOptions& o) {
  PackOptions p;
  p.divisor = padding_divisor(
      {.cp = o.topology.cp(), .tp = o.topology.tp(), .sequence_parallel = o.sequence_parallel});
  p.capacity = checked_mul(o.max_seqlen_per_dp_cp_rank, o.topology.cp(),
                           "the capacity max_seqlen_per_dp_cp_rank x cp");
  p.pad_id = o.pad_id;
  p.ignore_id = o.ignore_id;
  p.pad_positions = o.pad_positions;
  return p;
}

ScheduleOptions schedule_options_of(const PipelineOptions& o) {
  return ScheduleOptions::from_topology(o.topology, o.max_seqlen_per_dp_cp_rank, o.cost);
}

}  // namespace thdpack
