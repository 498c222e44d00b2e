#include "reports/plan_file_writer.hpp"

#include <vector>

#include "thdpack/schedule/plan_file.hpp"

namespace thdpack::cli {

namespace {

nlohmann::ordered_json with_format(const nlohmann::ordered_json& head) {
  nlohmann::ordered_json out{{"format", kPlanFileFormat}};
  for (const auto& [key, value] : head.items()) out[key] = value;
  return out;
}

}  // namespace

PlanFileWriter::PlanFileWriter(const std::string& path, const nlohmann::ordered_json& head)
    : file_(path, with_format(head)) {}

void PlanFileWriter::begin_step(int64_t step, std::span<const int64_t> ids) {
  file_.begin_step() << "{\"step\":" << step << ",\"ids\":"
                     << nlohmann::json(std::vector<int64_t>(ids.begin(), ids.end())).dump()
                     << ",\"plans\":{";
  first_plan_ = true;
}

void PlanFileWriter::add_plan(const std::string& scheduler, const Plan& plan,
                              std::span<const int64_t> padded_lengths) {
  file_.text() << (first_plan_ ? "" : ",") << nlohmann::json(scheduler).dump() << ":"
               << plan_json(scheduler, plan, padded_lengths);
  first_plan_ = false;
}

void PlanFileWriter::end_step() {
  file_.text() << "}}";
  file_.end_step();
}

void PlanFileWriter::close() {
  file_.close();
}

}  // namespace thdpack::cli
