#pragma once
// What `thdpack plan --scheduler <dynamic CP>` records about its run: in the plan file's head
// (--plan-out, plan_file_writer.hpp) and on the report page.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "thdpack/schedule/cost_model.hpp"

namespace thdpack::cli {

struct DynamicCpRunInfo {
  std::string workload;
  std::string topology;
  int dp = 1;
  int cp = 1;
  int64_t max_seqlen_per_dp_cp_rank = 0;
  int microbatch_multiple = 1;
  int min_cp = 1;
  int64_t divisor = 1;           ///< dynamic CP's padding divisor (2·dp·cp, × tp with SP)
  int64_t fixed_cp_divisor = 1;  ///< the fixed-CP plans' beside them
  CostModel cost;
};

/// The plan file's head: the fields above, the cost model's fields under "cost".
nlohmann::ordered_json plan_file_head(const DynamicCpRunInfo& info);

}  // namespace thdpack::cli
