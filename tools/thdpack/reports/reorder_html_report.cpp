#include "reports/reorder_html_report.hpp"

#include <cmath>

#include "reports/html_page.hpp"
#include "reports/svg_chart.hpp"
#include "reports/table.hpp"

namespace thdpack::cli {
namespace {

// One measure of one window: a bar of its own, side by side with the window's others.
struct Measure {
  std::string part;       ///< data-part
  std::string label;      ///< under the bar and in its title
  std::string css_class;  ///< its color
};

ChartBar window_bar(size_t window, const Measure& m, double value, const std::string& shown) {
  ChartBar bar;
  // Appended, not concatenated: GCC 12 warns (-Wrestrict) on "w" + std::string here.
  bar.label.append("w").append(std::to_string(window)).append(" ").append(m.label);
  bar.data = {{"window", std::to_string(window)}, {"part", m.part}};
  if (!std::isfinite(value)) {
    // An infinite spread (a rank with no vision cost at all) cannot be drawn to scale.
    bar.data.push_back({"infinite", "true"});
    value = 0;
  }
  bar.segments.push_back(
      {value, "window " + std::to_string(window) + ", " + m.label + ": " + shown, m.css_class, {}});
  return bar;
}

std::string ratio_text(double r) {
  return std::isfinite(r) ? fixed(r, 3) + "x" : "inf";
}

std::string spread_section(const ReorderReportInput& in) {
  BarChart spread;
  spread.id = "spread";
  spread.y_label = "vision cost max/min over ranks";
  BarChart peak;
  peak.id = "peak";
  peak.y_label = "slowest rank / mean, after";
  peak.height = 180;
  const Measure before{"before", "in", "padding"};
  const Measure after{"after", in.method, "mb"};
  const Measure reference{"reference", "longest-first", "bound-bar"};
  const Measure slowest{"peak", "max/mean", "mb"};
  for (size_t k = 0; k < in.windows.size(); ++k) {
    const ReorderWindowFigures& w = in.windows[k];
    spread.bars.push_back(window_bar(k, before, w.spread_before, ratio_text(w.spread_before)));
    spread.bars.push_back(window_bar(k, after, w.spread_after, ratio_text(w.spread_after)));
    spread.bars.push_back(
        window_bar(k, reference, w.spread_reference, ratio_text(w.spread_reference)));
    peak.bars.push_back(window_bar(k, slowest, w.peak_after, ratio_text(w.peak_after)));
  }
  spread.lines.push_back({1.0, "balanced", "bound"});
  peak.lines.push_back({1.0, "mean", "bound"});
  return "<section id=\"spread-section\"><h2>Vision cost per rank, window by window</h2>\n"
         "<p>The spread (largest over smallest per-rank vision cost, mean over the window's "
         "micro-batches) as read, after the run's assignment (" +
         html_escape(in.method) +
         ") and after the reference longest-first assignment of the same costs; below, the "
         "slowest rank over the mean after reordering, which sets the step.</p>\n" +
         render_bar_chart(spread) + render_bar_chart(peak) + "</section>\n";
}

std::string movement_section(const ReorderReportInput& in) {
  BarChart moved;
  moved.id = "moved";
  moved.y_label = "samples moved";
  moved.height = 180;
  BarChart bytes;
  bytes.id = "bytes";
  bytes.y_label = "MB moved";
  bytes.height = 180;
  BarChart exchange;
  exchange.id = "exchange";
  exchange.y_label = "exchange ms (slowest rank)";
  exchange.height = 180;
  const Measure ours{"moved", "moved", "mb"};
  const Measure reference{"reference-moved", "longest-first", "bound-bar"};
  const Measure megabytes{"bytes", "MB", "mb"};
  const Measure sync{"sync", "sync", "padding"};
  const Measure exposed{"exposed", "overlapped", "mb"};
  std::vector<std::vector<std::string>> rows;
  for (size_t k = 0; k < in.windows.size(); ++k) {
    const ReorderWindowFigures& w = in.windows[k];
    const auto count = [](int64_t n) { return static_cast<double>(n); };
    moved.bars.push_back(
        window_bar(k, ours, count(w.samples_moved),
                   std::to_string(w.samples_moved) + " of " + std::to_string(w.samples)));
    moved.bars.push_back(
        window_bar(k, reference, count(w.reference_moved),
                   std::to_string(w.reference_moved) + " of " + std::to_string(w.samples)));
    ChartBar mb = window_bar(k, megabytes, count(w.bytes_moved) / 1e6,
                             fixed(count(w.bytes_moved) / 1e6, 3) + " MB");
    mb.data.push_back({"bytes", std::to_string(w.bytes_moved)});
    bytes.bars.push_back(std::move(mb));
    exchange.bars.push_back(
        window_bar(k, sync, 1e3 * w.sync_seconds, fixed(1e3 * w.sync_seconds, 2) + " ms"));
    exchange.bars.push_back(window_bar(k, exposed, 1e3 * w.exposed_seconds,
                                       fixed(1e3 * w.exposed_seconds, 2) + " ms exposed"));
    rows.push_back({std::to_string(k), std::to_string(w.microbatches), ratio_text(w.spread_before),
                    ratio_text(w.spread_after), ratio_text(w.spread_reference),
                    ratio_text(w.peak_after),
                    std::to_string(w.samples_moved) + "/" + std::to_string(w.samples),
                    std::to_string(w.reference_moved), std::to_string(w.bytes_moved),
                    fixed(1e3 * w.sync_seconds, 2), fixed(1e3 * w.exposed_seconds, 2)});
  }
  return "<section id=\"movement\"><h2>What moved, and what the exchange cost</h2>\n"
         "<p>Samples owned by another rank than the one that read them (and how many the "
         "longest-first assignment would move), the bytes sent, and the slowest rank's exchange "
         "time, synchronous and left exposed when the next window is exchanged in the "
         "background.</p>\n" +
         render_bar_chart(moved) + render_bar_chart(bytes) + render_bar_chart(exchange) +
         html_table({"window", "micro-batches", "spread in", "after", "longest-first", "max/mean",
                     "moved", "longest-first moved", "bytes", "sync ms", "overlapped ms"},
                    rows) +
         "</section>\n";
}

}  // namespace

void write_reorder_html_report(const std::string& path, const ReorderReportInput& input) {
  write_html_page(path, "thdpack reorder",
                  {{"windows", std::to_string(input.windows.size())}, {"method", input.method}},
                  html_settings(input.settings) + spread_section(input) + movement_section(input));
}

}  // namespace thdpack::cli
