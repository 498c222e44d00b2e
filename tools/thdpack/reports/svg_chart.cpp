#include "reports/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace thdpack::cli {
namespace {

constexpr double kLeft = 64;    // room for the y axis labels
constexpr double kBottom = 34;  // room for the bar labels
constexpr double kTop = 12;
constexpr double kRight = 12;

std::string num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", v);
  return buffer;
}

/// A round step for about five ticks up to `top`.
double tick_step(double top) {
  const double raw = top / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

std::string tick_text(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

void write_data(std::ostringstream& out, const DataAttributes& data) {
  for (const auto& [name, value] : data)
    out << " data-" << name << "=\"" << html_escape(value) << '"';
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string data_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", value);
  return buffer;
}

std::string render_bar_chart(const BarChart& chart) {
  double top = chart.y_max;
  for (const auto& bar : chart.bars) {
    double sum = 0;
    for (const auto& s : bar.segments) sum += s.value;
    top = std::max({top, sum, bar.marker});
  }
  for (const auto& line : chart.lines) top = std::max(top, line.value);
  if (!(top > 0)) top = 1;
  const double step = tick_step(top);
  top = std::ceil(top / step - 1e-9) * step;

  const double plot_w = chart.width - kLeft - kRight;
  const double plot_h = chart.height - kTop - kBottom;
  const double n = static_cast<double>(std::max<size_t>(chart.bars.size(), 1));
  const double slot = plot_w / n;
  const double bar_w = std::max(1.0, slot * 0.8);
  auto y_of = [&](double v) { return kTop + plot_h * (1 - v / top); };

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"" << html_escape(chart.id)
      << "\" width=\"" << chart.width << "\" height=\"" << chart.height << "\" viewBox=\"0 0 "
      << chart.width << ' ' << chart.height << "\" data-y-max=\"" << data_number(top) << "\">\n";
  // Axis, grid and tick labels.
  for (double v = 0; v <= top + step / 2; v += step) {
    out << "<line class=\"grid\" x1=\"" << kLeft << "\" x2=\"" << chart.width - kRight << "\" y1=\""
        << num(y_of(v)) << "\" y2=\"" << num(y_of(v)) << "\"/>"
        << "<text class=\"tick\" x=\"" << kLeft - 6 << "\" y=\"" << num(y_of(v) + 4)
        << "\" text-anchor=\"end\">" << tick_text(v) << "</text>\n";
  }
  out << "<text class=\"axis-label\" x=\"12\" y=\"" << num(kTop + plot_h / 2)
      << "\" transform=\"rotate(-90 12 " << num(kTop + plot_h / 2) << ")\" text-anchor=\"middle\">"
      << html_escape(chart.y_label) << "</text>\n";

  // Bars, stacked bottom up; labels thinned out to about 32.
  const size_t label_every = std::max<size_t>(1, (chart.bars.size() + 31) / 32);
  for (size_t b = 0; b < chart.bars.size(); ++b) {
    const ChartBar& bar = chart.bars[b];
    const double x = kLeft + slot * static_cast<double>(b) + (slot - bar_w) / 2;
    double sum = 0;
    for (const auto& s : bar.segments) sum += s.value;
    out << "<g class=\"bar " << html_escape(bar.css_class) << "\" data-value=\"" << data_number(sum)
        << '"';
    write_data(out, bar.data);
    out << ">\n";
    double base = 0;
    for (const auto& s : bar.segments) {
      const double y0 = y_of(base), y1 = y_of(base + s.value);
      out << "<rect class=\"segment " << html_escape(s.css_class) << "\" x=\"" << num(x)
          << "\" y=\"" << num(y1) << "\" width=\"" << num(bar_w) << "\" height=\""
          << num(std::max(0.0, y0 - y1)) << "\" data-value=\"" << data_number(s.value) << '"';
      write_data(out, s.data);
      out << "><title>" << html_escape(s.title) << "</title></rect>\n";
      base += s.value;
    }
    if (bar.marker >= 0) {
      out << "<line class=\"marker\" x1=\"" << num(x - 2) << "\" x2=\"" << num(x + bar_w + 2)
          << "\" y1=\"" << num(y_of(bar.marker)) << "\" y2=\"" << num(y_of(bar.marker))
          << "\" data-value=\"" << data_number(bar.marker) << "\"><title>"
          << html_escape(bar.marker_title) << "</title></line>\n";
    }
    if (b % label_every == 0) {
      out << "<text class=\"bar-label\" x=\"" << num(x + bar_w / 2) << "\" y=\""
          << num(kTop + plot_h + 14) << "\" text-anchor=\"middle\">" << html_escape(bar.label)
          << "</text>\n";
    }
    out << "</g>\n";
  }
  for (size_t i = 0; i < chart.lines.size(); ++i) {
    const ChartLine& line = chart.lines[i];
    // Labels alternate right and left so that close lines stay readable.
    const bool right = i % 2 == 0;
    out << "<g class=\"hline " << html_escape(line.css_class) << "\" data-value=\""
        << data_number(line.value) << "\"><line x1=\"" << kLeft << "\" x2=\""
        << chart.width - kRight << "\" y1=\"" << num(y_of(line.value)) << "\" y2=\""
        << num(y_of(line.value)) << "\"/><text x=\""
        << (right ? chart.width - kRight - 4 : kLeft + 4) << "\" y=\"" << num(y_of(line.value) - 4)
        << "\" text-anchor=\"" << (right ? "end" : "start") << "\">" << html_escape(line.label)
        << "</text><title>" << html_escape(line.label) << "</title></g>\n";
  }
  out << "<line class=\"axis\" x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop
      << "\" y2=\"" << num(kTop + plot_h) << "\"/><line class=\"axis\" x1=\"" << kLeft << "\" x2=\""
      << chart.width - kRight << "\" y1=\"" << num(kTop + plot_h) << "\" y2=\""
      << num(kTop + plot_h) << "\"/>\n</svg>\n";
  return out.str();
}

}  // namespace thdpack::cli
