#pragma once
// Bar charts as inline SVG for the HTML reports: no scripts, fonts or files outside the document.
// Every bar segment carries its number in data-* attributes and a <title> (shown on hover), so a
// browser test can read back what was drawn.

#include <string>
#include <utility>
#include <vector>

namespace thdpack::cli {

/// data-NAME="value" attributes of an element, in order.
using DataAttributes = std::vector<std::pair<std::string, std::string>>;

struct ChartSegment {
  double value = 0;
  std::string title;      ///< hover text
  std::string css_class;  ///< e.g. "mb", "bubble", "padding"
  DataAttributes data;    ///< data-value is added
};

/// One bar: segments stacked bottom up. The bar's group carries data-value (the sum) and `data`.
struct ChartBar {
  std::string label;  ///< under the bar
  std::vector<ChartSegment> segments;
  std::string css_class;  ///< e.g. "straggler"
  DataAttributes data;
  double marker = -1;  ///< >= 0: a tick across the bar at this value (e.g. a lower bound)
  std::string marker_title;
};

/// A horizontal line across the chart (a bound, a mean).
struct ChartLine {
  double value = 0;
  std::string label;
  std::string css_class;
};

struct BarChart {
  std::string id;  ///< the svg's id
  std::string y_label;
  std::vector<ChartBar> bars;
  std::vector<ChartLine> lines;
  double y_max = 0;  ///< 0: from the data; set it to share a scale between charts
  int width = 720;
  int height = 220;
  /// Heights on a log10(1 + value) scale, ticks at 0, 1, 10, 100, ...: a histogram whose few
  /// outliers would vanish beside one tall bin (single-segment bars).
  bool log_scale = false;
  /// Each non-empty bar's total written above it.
  bool value_labels = false;
};

/// The chart as an <svg> element.
std::string render_bar_chart(const BarChart& chart);

/// Text for HTML element content and attribute values.
std::string html_escape(const std::string& text);

/// A number for data-* attributes: enough digits to read it back (%.9g).
std::string data_number(double value);

}  // namespace thdpack::cli
