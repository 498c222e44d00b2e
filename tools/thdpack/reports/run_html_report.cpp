#include "reports/run_html_report.hpp"

#include <algorithm>

#include "reports/html_page.hpp"
#include "reports/svg_chart.hpp"
#include "reports/table.hpp"

namespace thdpack::cli {
namespace {

/// One step's replicas over the bound for one scheduler; the straggler is the first maximum.
BarChart replica_chart(const std::string& scheduler, int64_t step,
                       const std::vector<double>& over_bound, double y_max) {
  BarChart chart;
  chart.id = "replicas-" + std::to_string(step) + "-" + scheduler;
  chart.y_label = scheduler + ": time / bound";
  chart.y_max = y_max;
  chart.width = 360;
  chart.height = 180;
  const auto straggler = static_cast<size_t>(
      std::max_element(over_bound.begin(), over_bound.end()) - over_bound.begin());
  for (size_t r = 0; r < over_bound.size(); ++r) {
    ChartBar bar;
    bar.label = std::to_string(r);
    bar.css_class = r == straggler ? "straggler" : "";
    bar.data = {{"step", std::to_string(step)},
                {"scheduler", scheduler},
                {"replica", std::to_string(r)},
                {"straggler", r == straggler ? "true" : "false"}};
    bar.segments.push_back({over_bound[r],
                            scheduler + ", step " + std::to_string(step) + ", replica " +
                                std::to_string(r) + ": " + fixed(over_bound[r], 4) + "x the bound",
                            "mb",
                            {}});
    chart.bars.push_back(std::move(bar));
  }
  chart.lines.push_back({1.0, "lower bound", "bound"});
  return chart;
}

std::string replicas_section(const RunReportInput& in) {
  double y_max = 1;
  for (const auto& s : in.steps) {
    for (double v : s.replica_over_bound) y_max = std::max(y_max, v);
    for (double v : s.dp_balanced_replica_over_bound) y_max = std::max(y_max, v);
  }
  std::string out =
      "<section id=\"replicas\"><h2>Modeled time per DP replica over the step's lower bound</h2>\n"
      "<p>Left: the run's scheduler (" +
      html_escape(in.scheduler) +
      "); right: dp_balanced on the same batch. The <span class=\"straggler-key\">straggler</span> "
      "sets the step.</p>\n";
  for (const auto& s : in.steps) {
    out += "<h3>step " + std::to_string(s.step) + ": " + fixed(s.step_ratio, 4) + "x the bound" +
           (s.dp_balanced_ratio > 0 ? " (dp_balanced " + fixed(s.dp_balanced_ratio, 4) + "x)"
                                    : std::string()) +
           "</h3>\n<div class=\"row\">" +
           render_bar_chart(replica_chart(in.scheduler, s.step, s.replica_over_bound, y_max));
    if (!s.dp_balanced_replica_over_bound.empty())
      out += render_bar_chart(
          replica_chart("dp_balanced", s.step, s.dp_balanced_replica_over_bound, y_max));
    out += "</div>\n";
  }
  return out + "</section>\n";
}

std::string steps_section(const RunReportInput& in) {
  BarChart exchange;
  exchange.id = "exchange";
  exchange.y_label = "MB exchanged";
  exchange.height = 180;
  BarChart wall;
  wall.id = "wall";
  wall.y_label = "wall ms (slowest rank)";
  wall.height = 180;
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : in.steps) {
    const auto minimum = static_cast<double>(s.exchange_minimum);
    const double excess = static_cast<double>(s.exchange_bytes) - minimum;
    ChartBar bytes;
    bytes.label = std::to_string(s.step);
    bytes.data = {{"step", std::to_string(s.step)}};
    bytes.segments = {{minimum / 1e6,
                       "minimum: " + fixed(minimum / 1e6, 3) + " MB",
                       "real",
                       {{"part", "minimum"}, {"bytes", std::to_string(s.exchange_minimum)}}},
                      {excess / 1e6,
                       "above the minimum: " + fixed(excess / 1e6, 3) + " MB",
                       "padding",
                       {{"part", "excess"}, {"bytes", fixed(excess, 0)}}}};
    exchange.bars.push_back(std::move(bytes));
    ChartBar time;
    time.label = std::to_string(s.step);
    time.data = {{"step", std::to_string(s.step)}, {"part", "wall"}};
    time.segments.push_back(
        {1e3 * s.seconds_max,
         "step " + std::to_string(s.step) + ": " + fixed(1e3 * s.seconds_max, 2) + " ms",
         "count",
         {}});
    wall.bars.push_back(std::move(time));
    rows.push_back({std::to_string(s.step), std::to_string(s.microbatches), percent(s.fill, 1),
                    fixed(s.step_ratio, 4) + "x",
                    s.dp_balanced_ratio > 0 ? fixed(s.dp_balanced_ratio, 4) + "x" : "-",
                    std::to_string(s.exchange_bytes), std::to_string(s.exchange_minimum),
                    std::to_string(s.collectives_max), fixed(1e3 * s.seconds_max, 2),
                    s.verified ? "verified" : "-"});
  }
  return "<section id=\"steps\"><h2>Every step</h2>\n<p>Bytes exchanged (summed over ranks): "
         "the minimum (every moved token once, CP slices only) and anything above it.</p>\n" +
         render_bar_chart(exchange) + render_bar_chart(wall) +
         html_table({"step", "micro-batches", "fill", "step / bound", "dp_balanced / bound",
                     "exchange bytes", "minimum", "collectives", "wall ms", "check"},
                    rows) +
         "</section>\n";
}

}  // namespace

void write_run_html_report(const std::string& path, const RunReportInput& input) {
  write_html_page(path, "thdpack run",
                  {{"steps", std::to_string(input.steps.size())}, {"scheduler", input.scheduler}},
                  html_settings(input.settings) + replicas_section(input) + steps_section(input));
}

}  // namespace thdpack::cli
