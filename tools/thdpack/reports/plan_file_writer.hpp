#pragma once
// `thdpack plan --plan-out FILE`: the plans of every step, fixed and dynamic CP, in the one plan
// file format (include/thdpack/schedule/plan_file.hpp), written step by step. The file is an
// OutputFile: in place only after close(); a run that fails leaves what was at the path.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "reports/plan_report.hpp"
#include "thdpack/schedule/plan.hpp"

namespace thdpack::cli {

class PlanFileWriter {
 public:
  /// `head`: the run's fields (workload, topology, cost model ...); "format" goes first.
  PlanFileWriter(const std::string& path, const nlohmann::ordered_json& head);
  void begin_step(int64_t step, std::span<const int64_t> ids);
  /// `padded_lengths`: the step's, in ids order, as `scheduler` saw them.
  void add_plan(const std::string& scheduler, const Plan& plan,
                std::span<const int64_t> padded_lengths);
  void end_step();
  void close();

 private:
  StepsJsonFile file_;
  bool first_plan_ = true;
};

}  // namespace thdpack::cli
