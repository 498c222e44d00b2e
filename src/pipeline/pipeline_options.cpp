#include <algorithm>

#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {

StageFields stage_fields(const Topology& topology, int pp_rank) {
  return StageFields{pp_rank == 0, pp_rank == topology.pp() - 1};
}

StageFields virtual_stage_fields(const Topology& topology, int pp_rank, int virtual_stage) {
  check(virtual_stage >= 0 && virtual_stage < topology.vpp(), "virtual stage ", virtual_stage,
        " outside [0, ", topology.vpp(), ")");
  return StageFields{pp_rank == 0 && virtual_stage == 0,
                     pp_rank == topology.pp() - 1 && virtual_stage == topology.vpp() - 1};
}

StageFields stage_fields(const PipelineOptions& options, int pp_rank) {
  StageFields f = stage_fields(options.topology, pp_rank);
  f.tokens = f.tokens || (options.tokens_on_last_stage && f.labels);
  return f;
}

StageFields virtual_stage_fields(const PipelineOptions& options, int pp_rank, int virtual_stage) {
  StageFields f = virtual_stage_fields(options.topology, pp_rank, virtual_stage);
  f.tokens = f.tokens || (options.tokens_on_last_stage && f.labels);
  return f;
}

bool reads_data(const Topology& topology, ReadingMode mode, int rank) {
  if (mode == ReadingMode::kAllRanks) return true;
  const Coordinates c = topology.coordinates(rank);
  return c.tp == 0 && (c.pp == 0 || c.pp == topology.pp() - 1);
}

bool uses_dynamic_cp(const PipelineOptions& o) {
  return scheduler_layout(o.scheduler) == CpLayout::kDynamic;
}

std::string capacity_name_of(const PipelineOptions& o) {
  return uses_dynamic_cp(o) ? "max_seqlen_per_dp_cp_rank x dp x cp"
                            : "max_seqlen_per_dp_cp_rank x cp";
}

PackOptions pack_options_of(const PipelineOptions& o) {
  PackOptions p;
  const bool dynamic = uses_dynamic_cp(o);
  p.divisor = padding_divisor({.cp = o.topology.cp(),
                               .tp = o.topology.tp(),
                               .sequence_parallel = o.sequence_parallel,
                               .dynamic_cp = dynamic,
                               .dp = o.topology.dp(),
                               .min_cp = o.min_cp});
  // With dynamic CP one sample may spread over the whole dp×cp group.
  p.capacity = checked_mul(o.max_seqlen_per_dp_cp_rank,
                           dynamic ? int64_t{o.topology.cp()} * o.topology.dp() : o.topology.cp(),
                           "the capacity " + capacity_name_of(o));
  p.pad_id = o.pad_id;
  p.ignore_id = o.ignore_id;
  p.ignore_masked_labels = o.ignore_masked_labels;
  p.pad_positions = o.pad_positions;
  p.tail_align = o.tail_align;
  p.tail_multiple = o.tail_multiple;
  p.tail_policy = o.tail_policy;
  p.fixed_cu_seqlens_entries = o.fixed_cu_seqlens_entries;
  return p;
}

ScheduleOptions schedule_options_of(const PipelineOptions& o) {
  ScheduleOptions s =
      ScheduleOptions::from_topology(o.topology, o.max_seqlen_per_dp_cp_rank, o.cost);
  s.max_sequences_per_pack = o.max_sequences_per_pack;
  if (uses_dynamic_cp(o)) {
    s.min_cp = o.min_cp;
    s.cost = CostModel::of_preset_or_coefficients(o.model, o.cost, o.gpu_tflops, o.cp_link_gbps,
                                                  o.cp_step_overhead_us);
  }
  if (o.fixed_cu_seqlens_entries > 0) {
    const bool dummy =
        o.tail_align != TailAlign::kNone && o.tail_policy == TailPolicy::kAppendDummySeq;
    const int64_t room = o.fixed_cu_seqlens_entries - 1 - (dummy ? 1 : 0);
    check(room >= 1, "fixed_cu_seqlens_entries=", o.fixed_cu_seqlens_entries,
          " leaves no room for a sequence", dummy ? " and the appended dummy sequence" : "");
    s.max_sequences_per_pack =
        s.max_sequences_per_pack > 0 ? std::min(s.max_sequences_per_pack, room) : room;
  }
  return s;
}

}  // namespace thdpack
