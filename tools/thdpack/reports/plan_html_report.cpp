#include "reports/plan_html_report.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include "reports/html_page.hpp"
#include "reports/svg_chart.hpp"
#include "reports/table.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/cp_partition.hpp"
#include "thdpack/packing/thd_layout.hpp"

namespace thdpack::cli {
namespace {

constexpr int kFillBins = 10;
/// A replica is drawn as the straggler only when the step waits for it noticeably: max/mean of
/// the replica times above this (at 1.0001 every bar is the same height and red would mislead).
constexpr double kStragglerImbalance = 1.01;

/// How modeled costs are shown: seconds with a model preset, raw cost units without.
struct Units {
  double scale = 1;
  std::string name = "cost";
};

Units units_of(const PlanRunInfo& info) {
  if (info.model.empty()) return {};
  return {1.0 / (info.gpu_tflops * 1e12), "s"};
}

/// Position of every id in the batch.
std::unordered_map<int64_t, size_t> positions_of(const GlobalBatch& batch) {
  std::unordered_map<int64_t, size_t> at;
  at.reserve(batch.ids.size());
  for (size_t i = 0; i < batch.ids.size(); ++i) at.emplace(batch.ids[i], i);
  return at;
}

struct PackFigures {
  int64_t real = 0;
  int64_t padded = 0;
  double cost = 0;  ///< per GPU: summed sample costs / cp
};

PackFigures pack_figures(std::span<const int64_t> ids, const PlanReportInput& in,
                         const std::unordered_map<int64_t, size_t>& at) {
  PackFigures f;
  for (int64_t id : ids) {
    const size_t i = at.at(id);
    f.real += in.batch.real_lengths[i];
    f.padded += in.batch.padded_lengths[i];
    f.cost += in.options.cost.cost(in.batch.padded_lengths[i]);
  }
  f.cost /= in.options.cp;
  return f;
}

/// Causal-attention work of each CP rank over all packs of a plan (per-sample zigzag), or empty
/// when the lengths are not divisible for CP.
std::vector<double> cp_work(const Plan& plan, const PlanReportInput& in,
                            const std::unordered_map<int64_t, size_t>& at) {
  std::vector<double> work(static_cast<size_t>(in.options.cp), 0.0);
  for (int64_t p = 0; p < plan.num_packs(); ++p) {
    std::vector<int32_t> cu{0}, cu_padded{0};
    for (int64_t id : plan.pack_at(p)) {
      const size_t i = at.at(id);
      cu.push_back(cu.back() + static_cast<int32_t>(in.batch.real_lengths[i]));
      cu_padded.push_back(cu_padded.back() + static_cast<int32_t>(in.batch.padded_lengths[i]));
    }
    try {
      const ThdLayout layout(cu, cu_padded);
      const std::vector<double> w = cp_attention_work(layout, in.options.cp);
      for (size_t r = 0; r < work.size(); ++r) work[r] += w[r];
    } catch (const InvalidArgument&) {
      return {};
    }
  }
  return work;
}

std::string settings_html(const PlanReportInput& in) {
  const PlanRunInfo& info = in.info;
  return html_settings(
      {{"workload", info.workload_description},
       {"layout", info.topology},
       {"packs", "M=" + std::to_string(info.max_seqlen_per_dp_cp_rank) +
                     " per DP x CP rank, capacity C=" + std::to_string(info.capacity) +
                     ", padding divisor " + std::to_string(info.divisor)},
       {"steps", std::to_string(info.steps) + " x global batch " +
                     std::to_string(info.global_batch) + " samples; pictures of step " +
                     std::to_string(in.step)},
       {"cost", info.model.empty() ? "direct coefficients (cost units)"
                                   : info.model + " training FLOPs at " +
                                         fixed(info.gpu_tflops, 0) + " TFLOP/s per GPU"}});
}

std::string summary_html(const PlanReportInput& in) {
  const nlohmann::json j = plan_json(in.info, in.summaries);
  const Units units = units_of(in.info);
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : j["schedulers"]) {
    if (s.contains("error")) {
      rows.push_back({s["name"].get<std::string>(), "failed: " + s["error"].get<std::string>()});
      continue;
    }
    rows.push_back({s["name"].get<std::string>(), fixed(s["microbatches_mean"].get<double>(), 2),
                    fixed(s["microbatch_lower_bound_mean"].get<double>(), 2),
                    percent(s["fill_mean"].get<double>(), 1),
                    percent(s["padding_fraction_mean"].get<double>(), 2),
                    fixed(s["step_cost_mean"].get<double>() * units.scale, 3),
                    fixed(s["step_ratio_mean"].get<double>(), 4) + "x",
                    fixed(s["imbalance_mean"].get<double>(), 4),
                    s.contains("speedup_vs_dp_balanced")
                        ? fixed(s["speedup_vs_dp_balanced"].get<double>(), 3) + "x"
                        : "-"});
  }
  return "<section id=\"summary\"><h2>Every step: means per scheduler</h2>\n" +
         html_table({"scheduler", "micro-batches", "bound", "fill", "padding",
                     "step (" + units.name + ")", "vs bound", "max/mean", "speedup"},
                    rows) +
         "</section>\n";
}

/// Replica r's bar: one segment per micro-batch (summed sample costs / cp), then the 1F1B bubble
/// (bubble_share of its largest micro-batch).
ChartBar replica_bar(const ReportedPlan& p, int r, bool straggler, double bubble_share,
                     const PlanReportInput& in, const std::unordered_map<int64_t, size_t>& at) {
  const Units units = units_of(in.info);
  ChartBar bar;
  bar.label = std::to_string(r);
  bar.css_class = straggler ? "straggler" : "";
  bar.data = {{"scheduler", p.scheduler},
              {"replica", std::to_string(r)},
              {"microbatches", std::to_string(p.plan.num_microbatches())},
              {"straggler", straggler ? "true" : "false"}};
  double largest = 0;
  for (int64_t k = 0; k < p.plan.num_microbatches(); ++k) {
    const PackFigures f = pack_figures(p.plan.pack(k, r), in, at);
    largest = std::max(largest, f.cost);
    bar.segments.push_back({f.cost * units.scale,
                            "replica " + std::to_string(r) + ", micro-batch " + std::to_string(k) +
                                ": " + std::to_string(p.plan.pack(k, r).size()) + " samples, " +
                                std::to_string(f.padded) + " tokens, " +
                                fixed(f.cost * units.scale, 4) + " " + units.name,
                            k % 2 ? "mb alt" : "mb",
                            {{"k", std::to_string(k)}, {"tokens", std::to_string(f.padded)}}});
  }
  if (bubble_share > 0) {
    bar.segments.push_back(
        {bubble_share * largest * units.scale,
         "1F1B bubble: " + fixed(bubble_share * largest * units.scale, 4) + " " + units.name,
         "bubble",
         {{"k", "bubble"}}});
  }
  return bar;
}

/// Modeled time per DP replica, each bar split into its micro-batches (and the 1F1B bubble);
/// the straggler is the replica the step waits for.
std::string replica_section(const PlanReportInput& in,
                            const std::unordered_map<int64_t, size_t>& at) {
  const Units units = units_of(in.info);
  const double bubble_share =
      in.options.pp > 1 ? static_cast<double>(in.options.pp - 1) / in.options.pp : 0.0;
  double y_max = 0;
  for (const auto& p : in.plans) {
    for (double c : p.stats.replica_step_costs) y_max = std::max(y_max, c * units.scale);
  }
  std::ostringstream out;
  out << "<section id=\"replicas\"><h2>Modeled time per DP replica (step " << in.step
      << ")</h2>\n<p>Each bar is one DP replica, stacked from its micro-batches (summed sample "
         "costs / cp); the step lasts as long as the tallest bar, the <span "
         "class=\"straggler-key\">straggler</span>, marked where max/mean exceeds " +
             fixed(kStragglerImbalance, 2) + ". Same scale for every scheduler.</p>\n";
  for (const auto& p : in.plans) {
    const auto& costs = p.stats.replica_step_costs;
    // -1: balanced within kStragglerImbalance, no replica is marked.
    const int straggler =
        p.stats.imbalance > kStragglerImbalance
            ? static_cast<int>(std::max_element(costs.begin(), costs.end()) - costs.begin())
            : -1;
    const double mean =
        std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
    BarChart chart;
    chart.id = "replicas-" + p.scheduler;
    chart.y_label = "modeled time (" + units.name + ")";
    chart.y_max = y_max;
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> classes;
    for (int r = 0; r < p.plan.dp(); ++r) {
      ChartBar bar = replica_bar(p, r, r == straggler, bubble_share, in, at);
      rows.push_back({std::to_string(r), std::to_string(p.plan.num_microbatches()),
                      fixed(costs[static_cast<size_t>(r)] * units.scale, 4),
                      fixed(costs[static_cast<size_t>(r)] / mean, 4),
                      r == straggler ? "straggler" : ""});
      classes.push_back(r == straggler ? "straggler" : "");
      chart.bars.push_back(std::move(bar));
    }
    chart.lines.push_back({p.stats.step_lower_bound * units.scale,
                           "lower bound " + fixed(p.stats.step_lower_bound * units.scale, 3),
                           "bound"});
    chart.lines.push_back({mean * units.scale, "mean " + fixed(mean * units.scale, 3), "mean"});
    out << "<h3>" << html_escape(p.scheduler) << ": step "
        << fixed(p.stats.step_cost * units.scale, 3) << " " << units.name << ", "
        << (straggler >= 0 ? "straggler replica " + std::to_string(straggler)
                           : std::string("replicas balanced"))
        << ", max/mean " << fixed(p.stats.imbalance, 4) << "</h3>\n"
        << render_bar_chart(chart)
        << html_details("numbers: " + p.scheduler + " per replica",
                        html_table({"replica", "micro-batches", "modeled (" + units.name + ")",
                                    "vs mean", ""},
                                   rows, classes));
  }
  out << "</section>\n";
  return out.str();
}

/// Micro-batches per replica in every step against ceil(L2/dp).
std::string microbatch_section(const PlanReportInput& in) {
  std::ostringstream out;
  out << "<section id=\"microbatches\"><h2>Micro-batches per replica, every step</h2>\n<p>Bars: "
         "micro-batches per DP replica; tick: the bin-packing lower bound ceil(L2/dp).</p>\n";
  double y_max = 0;
  for (const auto& s : in.summaries) {
    for (const auto& r : s.steps)
      y_max = std::max({y_max, static_cast<double>(r.stats.num_microbatches),
                        static_cast<double>(r.stats.microbatch_lower_bound)});
  }
  for (const auto& s : in.summaries) {
    if (!s.error.empty()) continue;
    BarChart chart;
    chart.id = "microbatches-" + s.name;
    chart.y_label = "micro-batches";
    chart.y_max = y_max;
    chart.height = 160;
    chart.width = std::min(720, 160 + 48 * static_cast<int>(s.steps.size()));
    std::vector<std::vector<std::string>> rows;
    for (size_t t = 0; t < s.steps.size(); ++t) {
      const PlanStats& st = s.steps[t].stats;
      ChartBar bar;
      bar.label = std::to_string(t);
      bar.data = {{"scheduler", s.name},
                  {"step", std::to_string(t)},
                  {"bound", std::to_string(st.microbatch_lower_bound)}};
      bar.segments.push_back({static_cast<double>(st.num_microbatches),
                              "step " + std::to_string(t) + ": " +
                                  std::to_string(st.num_microbatches) + " micro-batches, bound " +
                                  std::to_string(st.microbatch_lower_bound),
                              "count",
                              {}});
      bar.marker = static_cast<double>(st.microbatch_lower_bound);
      bar.marker_title = "bound " + std::to_string(st.microbatch_lower_bound);
      chart.bars.push_back(std::move(bar));
      rows.push_back({std::to_string(t), std::to_string(st.num_microbatches),
                      std::to_string(st.microbatch_lower_bound)});
    }
    out << "<h3>" << html_escape(s.name) << "</h3>\n"
        << render_bar_chart(chart)
        << html_details("numbers: " + s.name + " per step",
                        html_table({"step", "micro-batches", "bound"}, rows));
  }
  out << "</section>\n";
  return out.str();
}

/// How full the packs are: a histogram of padded tokens / C.
std::string fill_section(const PlanReportInput& in, const std::unordered_map<int64_t, size_t>& at) {
  std::ostringstream out;
  out << "<section id=\"fill\"><h2>Pack fill (step " << in.step
      << ")</h2>\n<p>Packs by padded tokens / C, in bins of 10%; counts on a log scale, so that a "
         "few emptier packs show beside many full ones.</p>\n";
  for (const auto& p : in.plans) {
    std::vector<int64_t> counts(kFillBins, 0);
    double lowest = 1;
    for (int64_t i = 0; i < p.plan.num_packs(); ++i) {
      const double fill = static_cast<double>(pack_figures(p.plan.pack_at(i), in, at).padded) /
                          static_cast<double>(in.info.capacity);
      lowest = std::min(lowest, fill);
      counts[static_cast<size_t>(
          std::clamp(static_cast<int>(fill * kFillBins), 0, kFillBins - 1))]++;
    }
    BarChart chart;
    chart.id = "fill-" + p.scheduler;
    chart.y_label = "packs (log)";
    chart.height = 160;
    chart.log_scale = true;  // one half-empty pack stays visible beside a thousand full ones
    chart.value_labels = true;
    std::vector<std::vector<std::string>> rows;
    for (int b = 0; b < kFillBins; ++b) {
      const std::string range = std::to_string(b * 10) + "-" + std::to_string(b * 10 + 10) + "%";
      ChartBar bar;
      bar.label = range;
      bar.data = {{"scheduler", p.scheduler}, {"bin", std::to_string(b)}};
      bar.segments.push_back(
          {static_cast<double>(counts[static_cast<size_t>(b)]),
           std::to_string(counts[static_cast<size_t>(b)]) + " packs " + range + " full",
           "fill",
           {}});
      chart.bars.push_back(std::move(bar));
      rows.push_back({range, std::to_string(counts[static_cast<size_t>(b)])});
    }
    out << "<h3>" << html_escape(p.scheduler) << ": " << p.plan.num_packs() << " packs, fill "
        << percent(p.stats.fill, 1) << " of dp x K x C, emptiest pack " << percent(lowest, 1)
        << "</h3>\n"
        << render_bar_chart(chart)
        << html_details("numbers: " + p.scheduler + " fill", html_table({"fill", "packs"}, rows));
  }
  out << "</section>\n";
  return out.str();
}

/// Causal-attention work per CP rank, summed over the step's packs (per-sample zigzag).
std::string cp_section(const PlanReportInput& in, const std::unordered_map<int64_t, size_t>& at) {
  if (in.options.cp == 1) {
    return "<section id=\"cp\"><h2>CP work per rank</h2>\n<p>cp = 1: every pack runs on one "
           "rank, so there is no context-parallel split to draw.</p></section>\n";
  }
  std::ostringstream out;
  out << "<section id=\"cp\"><h2>CP work per rank (step " << in.step
      << ")</h2>\n<p>Causal-attention work (query-key pairs) each CP rank holds under Transformer "
         "Engine's per-sample zigzag, summed over every pack of the step.</p>\n";
  for (const auto& p : in.plans) {
    const std::vector<double> work = cp_work(p.plan, in, at);
    if (work.empty()) {
      out << "<p>" << html_escape(p.scheduler)
          << ": lengths are not divisible by 2 x cp; no zigzag split.</p>\n";
      continue;
    }
    const double mean =
        std::accumulate(work.begin(), work.end(), 0.0) / static_cast<double>(work.size());
    BarChart chart;
    chart.id = "cp-" + p.scheduler;
    chart.y_label = "attention work (pairs)";
    chart.height = 160;
    chart.width = std::min(720, 160 + 60 * static_cast<int>(work.size()));
    std::vector<std::vector<std::string>> rows;
    for (size_t r = 0; r < work.size(); ++r) {
      ChartBar bar;
      bar.label = "cp " + std::to_string(r);
      bar.data = {{"scheduler", p.scheduler}, {"cp-rank", std::to_string(r)}};
      bar.segments.push_back({work[r],
                              "CP rank " + std::to_string(r) + ": " + fixed(work[r], 0) + " (" +
                                  fixed(work[r] / mean, 4) + " of the mean)",
                              "cpwork",
                              {}});
      chart.bars.push_back(std::move(bar));
      rows.push_back({std::to_string(r), fixed(work[r], 0), fixed(work[r] / mean, 4)});
    }
    out << "<h3>" << html_escape(p.scheduler) << ": max/mean "
        << fixed(*std::max_element(work.begin(), work.end()) / mean, 4) << "</h3>\n"
        << render_bar_chart(chart)
        << html_details("numbers: " + p.scheduler + " CP work",
                        html_table({"CP rank", "work", "vs mean"}, rows));
  }
  out << "</section>\n";
  return out.str();
}

/// Real tokens, padding to the divisor and unused capacity of the static allocation dp x K x C.
std::string padding_section(const PlanReportInput& in) {
  BarChart chart;
  chart.id = "padding";
  chart.y_label = "tokens";
  chart.height = 200;
  chart.width = std::min(720, 200 + 120 * static_cast<int>(in.plans.size()));
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : in.plans) {
    const double allocated =
        static_cast<double>(p.plan.num_packs()) * static_cast<double>(in.info.capacity);
    const auto real = static_cast<double>(p.stats.real_tokens);
    const auto padding = static_cast<double>(p.stats.padded_tokens - p.stats.real_tokens);
    const double unused = allocated - static_cast<double>(p.stats.padded_tokens);
    ChartBar bar =
        token_use_bar(p.scheduler, p.stats.real_tokens, p.stats.padded_tokens, allocated);
    bar.data = {{"scheduler", p.scheduler}};
    chart.bars.push_back(std::move(bar));
    rows.push_back({p.scheduler, fixed(real, 0), fixed(padding, 0),
                    percent(p.stats.padding_fraction, 2), fixed(unused, 0),
                    percent(unused / allocated, 1)});
  }
  return "<section id=\"padding-section\"><h2>Padding and unused capacity (step " +
         std::to_string(in.step) +
         ")</h2>\n<p>Of the static allocation dp x K x C: real tokens, padding of each sample to "
         "the divisor, and capacity no sample uses.</p>\n" +
         render_bar_chart(chart) +
         html_table({"scheduler", "real", "padding", "padding share", "unused", "unused share"},
                    rows) +
         "</section>\n";
}

// After a layout comparison: what the fixed-CP sections below it draw, and under which cost.
std::string fixed_cp_heading(const PlanReportInput& in) {
  return "<section id=\"fixed-cp\"><h2>Fixed CP in detail</h2>\n<p>The fixed-CP schedulers' "
         "plans as <code>thdpack plan</code> draws them without a dynamic-CP scheduler: under " +
         html_escape(in.info.model.empty()
                         ? std::string("the cost coefficients")
                         : in.info.model + " training FLOPs at " + fixed(in.info.gpu_tflops, 0) +
                               " TFLOP/s per GPU") +
         ", without the CP cost model's ring communication and per-step overhead, so their "
         "times are below the modeled steps above.</p></section>\n";
}

}  // namespace

void write_plan_html_report(const std::string& path, const PlanReportInput& input) {
  const auto at = positions_of(input.batch);
  const DynamicCpReportInput* layouts = input.layouts;
  DataAttributes body{{"workload", input.info.workload},
                      {"step", std::to_string(input.step)},
                      {"dp", std::to_string(input.info.dp)},
                      {"cp", std::to_string(input.info.cp)},
                      {"unit", units_of(input.info).name}};
  if (layouts) body.push_back({"ranks", std::to_string(input.info.dp * input.info.cp)});
  write_html_page(
      path, (layouts ? "thdpack plan (dynamic CP): " : "thdpack plan: ") + input.info.workload,
      body,
      (layouts ? layout_comparison_html(*layouts) + fixed_cp_heading(input)
               : settings_html(input)) +
          summary_html(input) + replica_section(input, at) + microbatch_section(input) +
          fill_section(input, at) + cp_section(input, at) + padding_section(input));
}

}  // namespace thdpack::cli
