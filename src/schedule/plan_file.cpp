// The plan file format (plan_file.hpp): writing and reading planned batches.

#include "thdpack/schedule/plan_file.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void malformed(const std::string& where, const std::string& what) {
  fail(where, ": ", what);
}

const Json& field(const Json& object, const char* name, const std::string& where) {
  if (!object.is_object()) malformed(where, "is not a JSON object");
  const auto it = object.find(name);
  if (it == object.end()) malformed(where, std::string("has no \"") + name + "\"");
  return *it;
}

std::vector<int64_t> int_array(const Json& value, const std::string& where) {
  if (!value.is_array()) malformed(where, "is not an array of integers");
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (const Json& v : value) {
    if (!v.is_number_integer()) malformed(where, "holds " + v.dump() + ", not an integer");
    out.push_back(v.get<int64_t>());
  }
  return out;
}

int positive_int(const Json& value, const std::string& where) {
  if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > INT32_MAX) {
    malformed(where, "must be an integer >= 1, not " + value.dump());
  }
  return value.get<int>();
}

std::string layout_name(CpLayout layout) {
  return layout == CpLayout::kFixed ? "fixed" : "dynamic";
}

std::string text_field(const Json& object, const char* name, const std::string& where) {
  const Json& value = field(object, name, where);
  if (!value.is_string()) malformed(where + "." + name, "is not a string");
  return value.get<std::string>();
}

PlannedBatch planned_batch_of(const Json& object, std::string scheduler, std::vector<int64_t> ids,
                              const std::string& where) {
  PlannedBatch out;
  const CpLayout layout = scheduler_layout(scheduler);  // throws on an unknown name
  const auto written = object.find("layout");
  if (written != object.end() && *written != layout_name(layout)) {
    malformed(where, "says layout " + written->dump() + " but " + scheduler + " plans " +
                         layout_name(layout) + " CP");
  }
  out.scheduler = std::move(scheduler);
  out.ids = std::move(ids);
  out.padded_lengths = int_array(field(object, "padded_lengths", where), where + ".padded_lengths");
  if (out.padded_lengths.size() != out.ids.size()) {
    malformed(where,
              message(out.padded_lengths.size(), " padded lengths for ", out.ids.size(), " ids"));
  }
  out.plan = Plan(positive_int(field(object, "dp", where), where + ".dp"),
                  positive_int(field(object, "cp", where), where + ".cp"));
  const Json& microbatches = field(object, "microbatches", where);
  if (!microbatches.is_array()) malformed(where + ".microbatches", "is not an array");
  for (size_t k = 0; k < microbatches.size(); ++k) {
    const std::string at = where + ".microbatches[" + std::to_string(k) + "]";
    if (!microbatches[k].is_array()) malformed(at, "is not an array of groups");
    out.plan.begin_microbatch();
    for (size_t g = 0; g < microbatches[k].size(); ++g) {
      const std::string group = at + "[" + std::to_string(g) + "]";
      const Json& first = field(microbatches[k][g], "first_rank", group);
      if (!first.is_number_integer() || first.get<int64_t>() < 0 ||
          first.get<int64_t>() > INT32_MAX) {
        malformed(group + ".first_rank", "must be an integer >= 0, not " + first.dump());
      }
      out.plan.add_group(first.get<int>(),
                         positive_int(field(microbatches[k][g], "size", group), group + ".size"),
                         int_array(field(microbatches[k][g], "ids", group), group + ".ids"));
    }
  }
  return out;
}

Json parse(std::string_view text, const std::string& where) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    malformed(where, std::string("is not valid JSON (") + e.what() + ")");
  }
}

}  // namespace

const PlannedBatch& PlanFileStep::plan(const std::string& scheduler) const {
  std::string names;
  for (const auto& [name, planned] : plans) {
    if (name == scheduler) return planned;
    names += (names.empty() ? "" : ", ") + name;
  }
  fail("step ", step, " of the plan file has no plan of ", scheduler,
       " (it has: ", names.empty() ? "none" : names, ")");
}

std::string plan_json(const std::string& scheduler, const Plan& plan,
                      std::span<const int64_t> padded_lengths) {
  std::ostringstream out;
  out << "{\"scheduler\":" << Json(scheduler).dump() << ",\"layout\":\""
      << layout_name(scheduler_layout(scheduler)) << "\",\"dp\":" << plan.dp()
      << ",\"cp\":" << plan.cp() << ",\"padded_lengths\":"
      << Json(std::vector<int64_t>(padded_lengths.begin(), padded_lengths.end())).dump()
      << ",\"microbatches\":[";
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    out << (k ? "," : "") << "[";
    bool first = true;
    for (const CpGroupView g : plan.microbatch(k)) {
      out << (first ? "" : ",") << "{\"first_rank\":" << g.first_rank << ",\"size\":" << g.size
          << ",\"ids\":" << Json(std::vector<int64_t>(g.ids.begin(), g.ids.end())).dump() << "}";
      first = false;
    }
    out << "]";
  }
  out << "]}";
  return out.str();
}

std::string planned_batch_json(const PlannedBatch& planned) {
  std::string body = plan_json(planned.scheduler, planned.plan, planned.padded_lengths);
  return "{\"ids\":" + Json(planned.ids).dump() + "," + body.substr(1);
}

PlannedBatch planned_batch_from_json(std::string_view json) {
  const std::string where = "planned batch";
  const Json object = parse(json, where);
  return planned_batch_of(object, text_field(object, "scheduler", where),
                          int_array(field(object, "ids", where), where + ".ids"), where);
}

std::vector<PlanFileStep> read_plan_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open plan file ", path);
  std::ostringstream text;
  text << in.rdbuf();
  const Json file = parse(text.str(), path);
  const Json& format = field(file, "format", path);
  if (format != kPlanFileFormat) {
    malformed(path, "has format " + format.dump() + ", not \"" + kPlanFileFormat +
                        "\" (write it again with this version's `thdpack plan --plan-out`)");
  }
  const Json& steps = field(file, "steps", path);
  if (!steps.is_array()) malformed(path + ": steps", "is not an array");
  std::vector<PlanFileStep> out;
  out.reserve(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    const std::string at = path + ": steps[" + std::to_string(s) + "]";
    PlanFileStep step;
    const Json& number = field(steps[s], "step", at);
    if (!number.is_number_integer()) malformed(at + ".step", "is not an integer");
    step.step = number.get<int64_t>();
    step.ids = int_array(field(steps[s], "ids", at), at + ".ids");
    const Json& plans = field(steps[s], "plans", at);
    if (!plans.is_object()) malformed(at + ".plans", "is not an object");
    for (const auto& [name, planned] : plans.items()) {
      step.plans.emplace_back(name,
                              planned_batch_of(planned, name, step.ids, at + ".plans." + name));
    }
    out.push_back(std::move(step));
  }
  return out;
}

}  // namespace thdpack
