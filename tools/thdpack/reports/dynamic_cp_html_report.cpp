#include "reports/dynamic_cp_html_report.hpp"

#include <algorithm>
#include <sstream>
#include <unordered_map>

#include "reports/html_page.hpp"
#include "reports/svg_chart.hpp"
#include "reports/table.hpp"

namespace thdpack::cli {
namespace {

using LengthOf = std::unordered_map<int64_t, int64_t>;

LengthOf lengths_of(std::span<const int64_t> ids, std::span<const int64_t> lengths) {
  LengthOf at;
  at.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) at.emplace(ids[i], lengths[i]);
  return at;
}

/// Modeled seconds one rank of a group of `cp` ranks spends on `ids`, and their tokens.
std::pair<double, int64_t> run_time(std::span<const int64_t> ids, const LengthOf& length, int cp,
                                    const CostModel& cost) {
  double t = 0;
  int64_t tokens = 0;
  for (const int64_t id : ids) {
    t += cost.time(length.at(id), cp);
    tokens += length.at(id);
  }
  return {t, tokens};
}

std::string settings_html(const DynamicCpReportInput& in) {
  const PlanRunInfo& info = in.info;
  return html_settings(
      {{"workload", info.workload_description},
       {"layout", info.topology + "; dynamic CP over all " + std::to_string(info.dp * info.cp) +
                      " dp x cp ranks"},
       {"packs", "M=" + std::to_string(info.max_seqlen_per_dp_cp_rank) +
                     " per DP x CP rank; padding divisor " + std::to_string(info.divisor) +
                     " (dynamic CP), " + std::to_string(info.fixed_cp_divisor) + " (fixed CP)"},
       {"steps", std::to_string(info.steps) + " x global batch " +
                     std::to_string(info.global_batch) + " samples; pictures of step " +
                     std::to_string(in.step)},
       {"cost", in.cost_description}});
}

std::string summary_html(const DynamicCpReportInput& in) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : in.rows) {
    if (!r.error.empty()) {
      rows.push_back({r.name, "failed: " + r.error});
      continue;
    }
    rows.push_back({r.name, r.cp, fixed(r.microbatches, 1), fixed(r.groups, 1), fixed(r.step, 4),
                    fixed(r.ratio, 4) + "x", fixed(r.vs_fastest, 3) + "x"});
  }
  return "<section id=\"layouts\"><h2>Every step: means per scheduler</h2>\n<p>vs bound: "
         "against a lower bound of the row's own layout (fixed CP and dynamic CP pad and group "
         "samples differently); vs fastest: against the fastest row.</p>\n" +
         html_table(
             {"scheduler", "cp", "mb/step", "groups/mb", "step (s)", "vs bound", "vs fastest"},
             rows) +
         "</section>\n";
}

/// Per scheduler of the reported step: its bars (one per replica or rank) and step.
struct SchedulerPicture {
  std::string scheduler;
  std::string kind;  ///< "fixed" or "dynamic"
  double step = 0;
  std::vector<ChartBar> bars;
  std::string details;  ///< HTML tables
};

SchedulerPicture fixed_picture(const ReportedPlan& p, const DynamicCpReportInput& in,
                               const LengthOf& length) {
  SchedulerPicture pic{p.scheduler, "fixed", 0, {}, ""};
  std::vector<std::vector<std::string>> rows;
  for (int r = 0; r < p.plan.dp(); ++r) {
    ChartBar bar;
    bar.label = std::to_string(r);
    bar.data = {{"scheduler", p.scheduler}, {"replica", std::to_string(r)}};
    double total = 0;
    for (int64_t k = 0; k < p.plan.num_microbatches(); ++k) {
      const auto [t, tokens] = run_time(p.plan.pack(k, r), length, in.info.cp, in.info.cost);
      total += t;
      bar.segments.push_back(
          {t,
           "replica " + std::to_string(r) + ", micro-batch " + std::to_string(k) + ": " +
               std::to_string(p.plan.pack(k, r).size()) + " samples, " + std::to_string(tokens) +
               " tokens on cp " + std::to_string(in.info.cp) + ", " + fixed(t, 4) + " s",
           k % 2 ? "mb alt" : "mb",
           {{"k", std::to_string(k)}, {"part", "busy"}}});
    }
    rows.push_back({std::to_string(r), std::to_string(p.plan.num_microbatches()), fixed(total, 4)});
    pic.step = std::max(pic.step, total);
    pic.bars.push_back(std::move(bar));
  }
  pic.details = html_details("numbers: " + p.scheduler + " per DP replica",
                             html_table({"replica", "micro-batches", "modeled (s)"}, rows));
  return pic;
}

SchedulerPicture dynamic_picture(const ReportedPlan& p, const DynamicCpReportInput& in,
                                 const LengthOf& length) {
  const int ranks = p.plan.ranks();
  SchedulerPicture pic{p.scheduler, "dynamic", 0, {}, ""};
  pic.bars.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    pic.bars[static_cast<size_t>(r)].label = std::to_string(r);
    pic.bars[static_cast<size_t>(r)].data = {{"scheduler", p.scheduler},
                                             {"rank", std::to_string(r)}};
  }
  std::vector<std::vector<std::string>> rows;
  for (int64_t k = 0; k < p.plan.num_microbatches(); ++k) {
    const MicrobatchView mb = p.plan.microbatch(k);
    std::vector<double> times;
    for (int64_t g = 0; g < mb.size(); ++g) {
      const CpGroupView group = mb[g];
      const auto [t, tokens] = run_time(group.ids, length, group.size, in.info.cost);
      times.push_back(t);
      rows.push_back({std::to_string(k), std::to_string(g), std::to_string(group.size),
                      std::to_string(group.first_rank) + ".." +
                          std::to_string(group.first_rank + group.size - 1),
                      std::to_string(group.ids.size()), std::to_string(tokens), fixed(t, 4)});
    }
    const double slowest = times.empty() ? 0 : *std::max_element(times.begin(), times.end());
    pic.step += slowest;
    for (int64_t g = 0; g < mb.size(); ++g) {
      const CpGroupView group = mb[g];
      for (int r = group.first_rank; r < group.first_rank + group.size; ++r) {
        ChartBar& bar = pic.bars[static_cast<size_t>(r)];
        const DataAttributes data = {{"k", std::to_string(k)},
                                     {"group-size", std::to_string(group.size)}};
        auto busy = data;
        busy.push_back({"part", "busy"});
        bar.segments.push_back(
            {times[static_cast<size_t>(g)],
             "rank " + std::to_string(r) + ", micro-batch " + std::to_string(k) + ": CP group of " +
                 std::to_string(group.size) + " (ranks " + std::to_string(group.first_rank) + ".." +
                 std::to_string(group.first_rank + group.size - 1) + "), " +
                 std::to_string(group.ids.size()) + " samples, " + fixed(times[g], 4) + " s",
             k % 2 ? "mb alt" : "mb", busy});
        if (slowest > times[g]) {
          auto idle = data;
          idle.push_back({"part", "idle"});
          bar.segments.push_back({slowest - times[g],
                                  "rank " + std::to_string(r) + ", micro-batch " +
                                      std::to_string(k) + ": idle " + fixed(slowest - times[g], 4) +
                                      " s until the slowest group",
                                  "bubble", idle});
        }
      }
    }
  }
  pic.details = html_details(
      "numbers: " + p.scheduler + " CP groups per micro-batch",
      html_table({"micro-batch", "group", "size", "ranks", "samples", "tokens", "modeled (s)"},
                 rows));
  return pic;
}

/// The lower bound of a picture's own layout: fixed-CP plans and dynamic-CP plans pad and group
/// samples differently, so neither bound holds for the other's plans.
double bound_of(const SchedulerPicture& p, const DynamicCpReportInput& in) {
  return p.kind == "fixed" ? in.fixed_lower_bound : in.lower_bound;
}

std::string step_chart(const std::vector<SchedulerPicture>& pictures,
                       const DynamicCpReportInput& in) {
  BarChart chart;
  chart.id = "steps";
  chart.y_label = "modeled step (s)";
  for (const auto& p : pictures) {
    ChartBar bar;
    bar.label = p.scheduler;
    bar.data = {{"scheduler", p.scheduler}, {"cp", p.kind}};
    bar.segments.push_back({p.step,
                            p.scheduler + ": " + fixed(p.step, 4) + " s, " +
                                fixed(p.step / bound_of(p, in), 4) + "x its layout's lower bound",
                            p.kind == "fixed" ? "mb" : "mb alt",
                            {{"part", "step"}}});
    chart.bars.push_back(std::move(bar));
  }
  chart.lines.push_back(
      {in.fixed_lower_bound, "fixed-CP bound " + fixed(in.fixed_lower_bound, 4), "bound"});
  chart.lines.push_back({in.lower_bound, "dynamic-CP bound " + fixed(in.lower_bound, 4), "bound"});
  return render_bar_chart(chart);
}

}  // namespace

std::string layout_comparison_html(const DynamicCpReportInput& in) {
  const LengthOf dynamic_length = lengths_of(in.ids, in.padded_lengths);
  const LengthOf fixed_length = lengths_of(in.ids, in.fixed_cp_padded_lengths);
  std::vector<SchedulerPicture> pictures;
  for (const auto& p : in.fixed) pictures.push_back(fixed_picture(p, in, fixed_length));
  for (const auto& p : in.dynamic) pictures.push_back(dynamic_picture(p, in, dynamic_length));
  double y_max = 0;
  for (const auto& p : pictures) y_max = std::max(y_max, p.step);

  std::ostringstream body;
  body << settings_html(in) << summary_html(in) << "<section id=\"steps\"><h2>Modeled step (step "
       << in.step
       << ")</h2>\n<p>Fixed CP: the slowest DP replica's sum over its micro-batches. Dynamic CP: "
          "the sum over micro-batches of the slowest CP group (groups change between "
          "micro-batches, so all ranks meet at each).</p>\n"
       << step_chart(pictures, in) << "</section>\n"
       << "<section id=\"ranks\"><h2>Modeled time per rank (step " << in.step
       << ")</h2>\n<p>Fixed CP: one bar per DP replica (its cp ranks run together), stacked from "
          "its micro-batches. Dynamic CP: one bar per dp x cp rank, stacked per micro-batch from "
          "the time of the CP group that holds the rank and the idle time until the slowest "
          "group ends. Same scale for every scheduler.</p>\n";
  for (auto& p : pictures) {
    BarChart chart;
    chart.id = "ranks-" + p.scheduler;
    chart.y_label = "modeled time (s)";
    chart.y_max = y_max;
    chart.bars = std::move(p.bars);
    const double bound = bound_of(p, in);
    chart.lines.push_back({bound, "lower bound " + fixed(bound, 4), "bound"});
    body << "<h3 data-scheduler=\"" << html_escape(p.scheduler) << "\" data-step-seconds=\""
         << data_number(p.step) << "\">" << html_escape(p.scheduler)
         << (p.kind == "fixed" ? " (fixed cp " + std::to_string(in.info.cp) + ")"
                               : std::string(" (dynamic CP)"))
         << ": step " << fixed(p.step, 4) << " s, " << fixed(p.step / bound, 4)
         << "x the lower bound of its layout</h3>\n"
         << render_bar_chart(chart) << p.details;
  }
  body << "</section>\n";
  return body.str();
}

}  // namespace thdpack::cli
