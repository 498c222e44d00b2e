#include "dynamic_cp_plan_file.hpp"

#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>
#include <vector>

#include "thdpack/core/errors.hpp"

namespace thdpack::cli {

namespace {

nlohmann::ordered_json head_of(const DynamicCpRunInfo& info) {
  const CpCostModel& c = info.cost;
  return {
      {"format", "thdpack-dynamic-cp-plans-v1"},
      {"workload", info.workload},
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
       {{"linear", c.compute.linear},
        {"quadratic", c.compute.quadratic},
        {"flops_per_second", c.flops_per_second},
        {"kv_bytes_per_token", c.kv_bytes_per_token},
        {"passes", c.passes},
        {"link_bytes_per_second", c.link_bytes_per_second},
        {"step_overhead_seconds", c.step_overhead_seconds},
        {"layers", c.layers}}}};
}

template <typename T>
std::string json_array(std::span<const T> values) {
  return nlohmann::json(std::vector<T>(values.begin(), values.end())).dump();
}

}  // namespace

DynamicCpPlanWriter::DynamicCpPlanWriter(const std::string& path, const DynamicCpRunInfo& info)
    : file_(path, head_of(info)) {}

void DynamicCpPlanWriter::begin_step(int64_t step, std::span<const int64_t> ids,
                                     std::span<const int64_t> padded_lengths,
                                     std::span<const int64_t> fixed_cp_padded_lengths) {
  step_ids_ = ids;
  file_.begin_step() << "{\"step\":" << step << ",\"ids\":" << json_array(ids)
                     << ",\"padded_lengths\":" << json_array(padded_lengths)
                     << ",\"fixed_cp_padded_lengths\":" << json_array(fixed_cp_padded_lengths)
                     << ",\"fixed_cp_plans\":{";
  first_fixed_ = true;
  first_dynamic_ = true;
  in_dynamic_ = false;
}

void DynamicCpPlanWriter::add_fixed_cp_plan(const std::string& scheduler, const Plan& plan) {
  file_.text() << (first_fixed_ ? "" : ",") << nlohmann::json(scheduler).dump() << ":";
  write_plan_json(file_.text(), plan);
  first_fixed_ = false;
}

void DynamicCpPlanWriter::add_dynamic_cp_plan(const std::string& scheduler,
                                              const DynamicCpPlan& plan) {
  if (!in_dynamic_) {
    file_.text() << "},\"plans\":{";
    in_dynamic_ = true;
  }
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> where;
  where.reserve(step_ids_.size());
  nlohmann::json mbs = nlohmann::json::array();
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    nlohmann::json groups = nlohmann::json::array();
    const auto& mb = plan.microbatches[static_cast<size_t>(k)];
    for (size_t g = 0; g < mb.groups.size(); ++g) {
      const CpGroup& group = mb.groups[g];
      std::vector<int> ranks(static_cast<size_t>(group.size));
      for (int r = 0; r < group.size; ++r) ranks[static_cast<size_t>(r)] = group.first_rank + r;
      groups.push_back({{"first_rank", group.first_rank},
                        {"size", group.size},
                        {"ranks", ranks},
                        {"ids", group.ids}});
      for (const int64_t id : group.ids) where[id] = {k, static_cast<int64_t>(g)};
    }
    mbs.push_back({{"groups", std::move(groups)}});
  }
  nlohmann::json sample_groups = nlohmann::json::array();
  for (const int64_t id : step_ids_) {
    const auto it = where.find(id);
    if (it == where.end()) {
      throw InternalError("dynamic CP plan of " + scheduler + " misses sample " +
                          std::to_string(id));
    }
    sample_groups.push_back({it->second.first, it->second.second});
  }
  file_.text() << (first_dynamic_ ? "" : ",") << nlohmann::json(scheduler).dump() << ":"
       << nlohmann::json{{"microbatches", std::move(mbs)}, {"sample_groups", std::move(sample_groups)}}
              .dump();
  first_dynamic_ = false;
}

void DynamicCpPlanWriter::end_step() {
  if (!in_dynamic_) file_.text() << "},\"plans\":{";
  file_.text() << "}}";
  file_.end_step();
}

void DynamicCpPlanWriter::close() { file_.close(); }

}  // namespace thdpack::cli
