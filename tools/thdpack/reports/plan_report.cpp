#include "reports/plan_report.hpp"

#include <algorithm>
#include <numeric>

#include "reports/json_output.hpp"
#include "reports/table.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack::cli {
namespace {

template <typename F>
double mean_of(const std::vector<StepRecord>& steps, F field) {
  if (steps.empty()) return 0;
  double sum = 0;
  for (const auto& s : steps) sum += field(s);
  return sum / static_cast<double>(steps.size());
}

template <typename F>
double max_of(const std::vector<StepRecord>& steps, F field) {
  double m = 0;
  for (const auto& s : steps) m = std::max(m, static_cast<double>(field(s)));
  return m;
}

double median_plan_ms(const std::vector<StepRecord>& steps) {
  std::vector<double> ms;
  for (const auto& s : steps) ms.push_back(s.plan_seconds * 1e3);
  if (ms.empty()) return 0;
  std::sort(ms.begin(), ms.end());
  return ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
}

const SchedulerSummary* find(const std::vector<SchedulerSummary>& all, const std::string& name) {
  for (const auto& s : all) {
    if (s.name == name && s.error.empty()) return &s;
  }
  return nullptr;
}

double step_cost_mean(const SchedulerSummary& s) {
  return mean_of(s.steps, [](const StepRecord& r) { return r.stats.step_cost; });
}

std::string range_text(const std::vector<StepRecord>& steps) {
  int64_t lo = INT64_MAX, hi = 0;
  for (const auto& s : steps) {
    lo = std::min(lo, s.stats.num_microbatches);
    hi = std::max(hi, s.stats.num_microbatches);
  }
  if (steps.empty()) return "-";
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}

}  // namespace

void print_plan_table(std::ostream& out, const PlanRunInfo& info,
                      const std::vector<SchedulerSummary>& summaries) {
  out << "workload   " << info.workload << ": " << info.workload_description << '\n'
      << "layout     " << info.topology << '\n'
      << "packs      M=" << info.max_seqlen_per_dp_cp_rank
      << " per DP x CP rank, capacity C=M x cp=" << info.capacity << ", padding divisor "
      << info.divisor << '\n'
      << "steps      " << info.steps << " x global batch " << info.global_batch << " samples\n"
      << "cost       "
      << (info.model.empty() ? "direct coefficients" : info.model + " training FLOPs")
      << (info.model.empty() ? ""
                             : ", step time at " + fixed(info.gpu_tflops, 0) + " TFLOP/s per GPU")
      << "\n\n";

  const bool seconds = !info.model.empty();
  Table table({"scheduler", "mb/step", "mb bound", "fill", "padding",
               seconds ? "step s" : "step cost", "vs bound", "vs tight", "max/mean", "cap viol",
               "TFLOP/step", "plan ms", "speedup"});
  const SchedulerSummary* reference = find(summaries, "dp_balanced");
  for (const auto& s : summaries) {
    if (!s.error.empty()) {
      table.add_row({s.name, "failed: " + s.error});
      continue;
    }
    const auto& st = s.steps;
    const double step = step_cost_mean(s);
    const double step_shown = seconds ? step / (info.gpu_tflops * 1e12) : step;
    const double tight = mean_of(
        st, [](const StepRecord& r) { return r.stats.step_cost / r.stats.step_tight_bound; });
    std::string speedup = "-";
    if (reference != nullptr && step > 0)
      speedup = fixed(step_cost_mean(*reference) / step, 3) + "x";
    table.add_row({
        s.name,
        range_text(st),
        fixed(mean_of(st,
                      [](const StepRecord& r) {
                        return static_cast<double>(r.stats.microbatch_lower_bound);
                      }),
              1),
        fixed(100 * mean_of(st, [](const StepRecord& r) { return r.stats.fill; }), 1) + "%",
        fixed(100 * mean_of(st, [](const StepRecord& r) { return r.stats.padding_fraction; }), 2) +
            "%",
        seconds ? fixed(step_shown, 2) : fixed(step_shown, 0),
        fixed(mean_of(st, [](const StepRecord& r) { return r.stats.step_ratio; }), 3) + "x",
        fixed(tight, 3) + "x",
        fixed(mean_of(st, [](const StepRecord& r) { return r.stats.imbalance; }), 3),
        std::to_string(static_cast<int64_t>(
            max_of(st, [](const StepRecord& r) { return r.stats.cap_violations; }))),
        seconds ? fixed(mean_of(st, [](const StepRecord& r) { return r.tflops; }), 1) : "-",
        fixed(median_plan_ms(st), 3),
        speedup,
    });
  }
  table.print(out);
  out << "\nmb/step: micro-batches per DP replica (min-max over steps); mb bound: ceil(L2/dp); "
         "fill: "
         "real tokens / (dp x mb x C);\nvs bound: modeled step / max(total/dp, largest sample)/cp; "
         "vs tight: against the pigeonhole bound; speedup: dp_balanced step / this step.\n";
}

nlohmann::json plan_json(const PlanRunInfo& info, const std::vector<SchedulerSummary>& summaries) {
  using nlohmann::json;
  json j;
  j["workload"] = info.workload;
  j["workload_description"] = info.workload_description;
  j["topology"] = info.topology;
  j["dp"] = info.dp;
  j["cp"] = info.cp;
  j["max_seqlen_per_dp_cp_rank"] = info.max_seqlen_per_dp_cp_rank;
  j["capacity"] = info.capacity;
  j["padding_divisor"] = info.divisor;
  j["global_batch"] = info.global_batch;
  j["steps"] = info.steps;
  j["model"] = info.model;
  j["gpu_tflops"] = info.gpu_tflops;
  j["cost"] = {{"linear", info.cost.linear}, {"quadratic", info.cost.quadratic}};
  const SchedulerSummary* reference = find(summaries, "dp_balanced");
  json list = json::array();
  for (const auto& s : summaries) {
    json e;
    e["name"] = s.name;
    if (!s.error.empty()) {
      e["error"] = s.error;
      list.push_back(e);
      continue;
    }
    const auto& st = s.steps;
    e["microbatches_mean"] = mean_of(
        st, [](const StepRecord& r) { return static_cast<double>(r.stats.num_microbatches); });
    e["microbatch_lower_bound_mean"] = mean_of(st, [](const StepRecord& r) {
      return static_cast<double>(r.stats.microbatch_lower_bound);
    });
    e["fill_mean"] = mean_of(st, [](const StepRecord& r) { return r.stats.fill; });
    e["padding_fraction_mean"] =
        mean_of(st, [](const StepRecord& r) { return r.stats.padding_fraction; });
    e["step_cost_mean"] = step_cost_mean(s);
    if (!info.model.empty()) e["step_seconds_mean"] = step_cost_mean(s) / (info.gpu_tflops * 1e12);
    e["step_ratio_mean"] = mean_of(st, [](const StepRecord& r) { return r.stats.step_ratio; });
    e["step_ratio_max"] = max_of(st, [](const StepRecord& r) { return r.stats.step_ratio; });
    e["tight_ratio_mean"] = mean_of(
        st, [](const StepRecord& r) { return r.stats.step_cost / r.stats.step_tight_bound; });
    e["imbalance_mean"] = mean_of(st, [](const StepRecord& r) { return r.stats.imbalance; });
    e["cap_violations"] = static_cast<int64_t>(
        max_of(st, [](const StepRecord& r) { return r.stats.cap_violations; }));
    e["tflops_per_step_mean"] = mean_of(st, [](const StepRecord& r) { return r.tflops; });
    e["plan_ms_median"] = median_plan_ms(st);
    if (reference != nullptr)
      e["speedup_vs_dp_balanced"] = step_cost_mean(*reference) / step_cost_mean(s);
    json per_step = json::array();
    for (const auto& r : st) {
      per_step.push_back({{"microbatches", r.stats.num_microbatches},
                          {"microbatch_lower_bound", r.stats.microbatch_lower_bound},
                          {"fill", r.stats.fill},
                          {"padding_fraction", r.stats.padding_fraction},
                          {"step_cost", r.stats.step_cost},
                          {"step_lower_bound", r.stats.step_lower_bound},
                          {"step_tight_bound", r.stats.step_tight_bound},
                          {"imbalance", r.stats.imbalance},
                          {"cap_violations", r.stats.cap_violations},
                          {"s1_real", r.stats.sums.s1_real},
                          {"s2_real", r.stats.sums.s2_real},
                          {"s1_padded", r.stats.sums.s1_padded},
                          {"s2_padded", r.stats.sums.s2_padded},
                          {"plan_ms", r.plan_seconds * 1e3}});
    }
    e["per_step"] = per_step;
    list.push_back(e);
  }
  j["schedulers"] = list;
  return j;
}

StepsJsonFile::StepsJsonFile(const std::string& path, const nlohmann::ordered_json& head)
    : file_(path) {
  std::string text = json_text(head);
  text.pop_back();  // reopen the object to append "steps"
  out_ << text << ",\"steps\":[";
}

void StepsJsonFile::flush() {
  const std::string text = out_.str();
  file_.write(text.data(), text.size());
  out_.str("");
}

std::ostringstream& StepsJsonFile::begin_step() {
  out_ << (first_step_ ? "\n" : ",\n");
  first_step_ = false;
  return out_;
}

void StepsJsonFile::end_step() {
  flush();
}

void StepsJsonFile::close() {
  if (closed_) return;
  closed_ = true;
  out_ << "\n]}\n";
  flush();
  file_.commit();
}

// cp, pp, cost and gpu_tflops let a reader recompute every modeled time (plan_stats.hpp).
nlohmann::ordered_json plan_file_head(const PlanRunInfo& info) {
  const CostModel& c = info.cost;
  return {{"workload", info.workload},
          {"topology", info.topology},
          {"dp", info.dp},
          {"cp", info.cp},
          {"pp", info.pp},
          {"ranks", info.dp * info.cp},
          {"max_seqlen_per_dp_cp_rank", info.max_seqlen_per_dp_cp_rank},
          {"capacity", info.capacity},
          {"microbatch_multiple", info.microbatch_multiple},
          {"min_cp", info.min_cp},
          {"divisor", info.divisor},
          {"fixed_cp_divisor", info.fixed_cp_divisor},
          {"global_batch", info.global_batch},
          {"model", info.model},
          {"gpu_tflops", info.gpu_tflops},
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
