#include "reports/dynamic_cp_run_info.hpp"

namespace thdpack::cli {

nlohmann::ordered_json plan_file_head(const DynamicCpRunInfo& info) {
  const CostModel& c = info.cost;
  return {{"workload", info.workload},
          {"topology", info.topology},
          {"dp", info.dp},
          {"cp", info.cp},
          {"ranks", info.dp * info.cp},
          {"max_seqlen_per_dp_cp_rank", info.max_seqlen_per_dp_cp_rank},
          {"microbatch_multiple", info.microbatch_multiple},
          {"min_cp", info.min_cp},
          {"divisor", info.divisor},
          {"fixed_cp_divisor", info.fixed_cp_divisor},
          {"cost",
           {{"linear", c.linear},
            {"quadratic", c.quadratic},
            {"flops_per_second", c.flops_per_second},
            {"kv_bytes_per_token", c.kv_bytes_per_token},
            {"passes", c.passes},
            {"link_bytes_per_second", c.link_bytes_per_second},
            {"step_overhead_seconds", c.step_overhead_seconds},
            {"layers", c.layers}}}};
}

}  // namespace thdpack::cli
