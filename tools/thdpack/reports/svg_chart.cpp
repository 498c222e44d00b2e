#include "reports/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>
#include <vector>

#include "reports/table.hpp"

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

/// The ticks of the y axis and the height a value is drawn at, on a linear or a log scale.
struct Scale {
  bool log = false;
  double top = 1;   // in drawn units
  double step = 1;  // linear only

  double drawn(double v) const { return log ? std::log10(1 + std::max(0.0, v)) : v; }
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {
      out.push_back(0);
      for (double v = 1; drawn(v) <= top + 1e-9; v *= 10) out.push_back(v);
    } else {
      for (double v = 0; v <= top + step / 2; v += step) out.push_back(v);
    }
    return out;
  }
};

Scale scale_of(const BarChart& chart) {
  double top = chart.y_max;
  for (const auto& bar : chart.bars) {
    double sum = 0;
    for (const auto& s : bar.segments) sum += s.value;
    top = std::max({top, sum, bar.marker});
  }
  for (const auto& line : chart.lines) top = std::max(top, line.value);
  Scale scale;
  scale.log = chart.log_scale;
  if (scale.log) {
    // Up to the next power of ten, so that the top tick is drawn too.
    const double power = std::ceil(std::log10(std::max(top, 1.0)) - 1e-9);
    scale.top = scale.drawn(std::pow(10.0, power));
    return scale;
  }
  if (!(top > 0)) top = 1;
  scale.step = tick_step(top);
  scale.top = std::ceil(top / scale.step - 1e-9) * scale.step;
  return scale;
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

namespace {

// Estimated width in pixels of a label of the charts' small font (no font metrics in the writer).
double text_width(const std::string& text) {
  return 7.0 * static_cast<double>(text.size()) + 2;
}

// Where things go in a chart's frame.
struct Frame {
  const BarChart& chart;
  Scale scale;
  double plot_w, plot_h, slot, bar_w;

  explicit Frame(const BarChart& c)
      : chart(c),
        scale(scale_of(c)),
        plot_w(c.width - kLeft - kRight),
        plot_h(c.height - kTop - kBottom),
        slot(plot_w / static_cast<double>(std::max<size_t>(c.bars.size(), 1))),
        bar_w(std::max(1.0, slot * 0.8)) {}
  double y_of(double v) const { return kTop + plot_h * (1 - scale.drawn(v) / scale.top); }
  double x_of(size_t bar) const {
    return kLeft + slot * static_cast<double>(bar) + (slot - bar_w) / 2;
  }
};

void write_axes(std::ostringstream& out, const Frame& f) {
  const BarChart& chart = f.chart;
  for (const double v : f.scale.ticks()) {
    out << "<line class=\"grid\" x1=\"" << kLeft << "\" x2=\"" << chart.width - kRight << "\" y1=\""
        << num(f.y_of(v)) << "\" y2=\"" << num(f.y_of(v)) << "\"/>";
    // On a log scale 0 and 1 sit close together: the baseline needs no number.
    if (!(f.scale.log && v == 0)) {
      out << "<text class=\"tick\" x=\"" << kLeft - 6 << "\" y=\"" << num(f.y_of(v) + 4)
          << "\" text-anchor=\"end\">" << scaled(v) << "</text>";
    }
    out << '\n';
  }
  out << "<text class=\"axis-label\" x=\"12\" y=\"" << num(kTop + f.plot_h / 2)
      << "\" transform=\"rotate(-90 12 " << num(kTop + f.plot_h / 2)
      << ")\" text-anchor=\"middle\">" << html_escape(chart.y_label) << "</text>\n";
}

void write_bar(std::ostringstream& out, const Frame& f, size_t b, bool labelled) {
  const ChartBar& bar = f.chart.bars[b];
  const double x = f.x_of(b);
  double sum = 0;
  for (const auto& s : bar.segments) sum += s.value;
  out << "<g class=\"bar " << html_escape(bar.css_class) << "\" data-value=\"" << data_number(sum)
      << '"';
  write_data(out, bar.data);
  out << ">\n";
  double base = 0;
  for (const auto& s : bar.segments) {
    const double y0 = f.y_of(base), y1 = f.y_of(base + s.value);
    out << "<rect class=\"segment " << html_escape(s.css_class) << "\" x=\"" << num(x) << "\" y=\""
        << num(y1) << "\" width=\"" << num(f.bar_w) << "\" height=\"" << num(std::max(0.0, y0 - y1))
        << "\" data-value=\"" << data_number(s.value) << '"';
    write_data(out, s.data);
    out << "><title>" << html_escape(s.title) << "</title></rect>\n";
    base += s.value;
  }
  // A value is written where it fits over its bar (a narrow bar's small count still does).
  const std::string value = scaled(sum);
  if (f.chart.value_labels && sum > 0 && text_width(value) <= f.slot) {
    out << "<text class=\"value-label\" x=\"" << num(x + f.bar_w / 2) << "\" y=\""
        << num(f.y_of(sum) - 3) << "\" text-anchor=\"middle\">" << value << "</text>\n";
  }
  if (bar.marker >= 0) {
    out << "<line class=\"marker\" x1=\"" << num(x - 2) << "\" x2=\"" << num(x + f.bar_w + 2)
        << "\" y1=\"" << num(f.y_of(bar.marker)) << "\" y2=\"" << num(f.y_of(bar.marker))
        << "\" data-value=\"" << data_number(bar.marker) << "\"><title>"
        << html_escape(bar.marker_title) << "</title></line>\n";
  }
  if (labelled) {
    out << "<text class=\"bar-label\" x=\"" << num(x + f.bar_w / 2) << "\" y=\""
        << num(kTop + f.plot_h + 14) << "\" text-anchor=\"middle\">" << html_escape(bar.label)
        << "</text>\n";
  }
  out << "</g>\n";
}

void write_lines(std::ostringstream& out, const Frame& f) {
  const BarChart& chart = f.chart;
  for (size_t i = 0; i < chart.lines.size(); ++i) {
    const ChartLine& line = chart.lines[i];
    // Labels alternate right and left so that close lines stay readable.
    const bool right = i % 2 == 0;
    out << "<g class=\"hline " << html_escape(line.css_class) << "\" data-value=\""
        << data_number(line.value) << "\"><line x1=\"" << kLeft << "\" x2=\""
        << chart.width - kRight << "\" y1=\"" << num(f.y_of(line.value)) << "\" y2=\""
        << num(f.y_of(line.value)) << "\"/><text x=\""
        << (right ? chart.width - kRight - 4 : kLeft + 4) << "\" y=\""
        << num(f.y_of(line.value) - 4) << "\" text-anchor=\"" << (right ? "end" : "start") << "\">"
        << html_escape(line.label) << "</text><title>" << html_escape(line.label)
        << "</title></g>\n";
  }
}

}  // namespace

std::string render_bar_chart(const BarChart& chart) {
  const Frame f(chart);
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"" << html_escape(chart.id)
      << "\" width=\"" << chart.width << "\" height=\"" << chart.height << "\" viewBox=\"0 0 "
      << chart.width << ' ' << chart.height << "\" data-y-max=\"" << data_number(f.scale.top)
      << "\" data-scale=\"" << (f.scale.log ? "log" : "linear") << "\">\n";
  write_axes(out, f);
  // Bar labels thinned out so that the longest one fits between the labels drawn.
  double widest = 0;
  for (const auto& bar : chart.bars) widest = std::max(widest, text_width(bar.label));
  const auto label_every = static_cast<size_t>(std::max(1.0, std::ceil(widest / f.slot)));
  for (size_t b = 0; b < chart.bars.size(); ++b) write_bar(out, f, b, b % label_every == 0);
  write_lines(out, f);
  out << "<line class=\"axis\" x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop
      << "\" y2=\"" << num(kTop + f.plot_h) << "\"/><line class=\"axis\" x1=\"" << kLeft
      << "\" x2=\"" << chart.width - kRight << "\" y1=\"" << num(kTop + f.plot_h) << "\" y2=\""
      << num(kTop + f.plot_h) << "\"/>\n</svg>\n";
  return out.str();
}

}  // namespace thdpack::cli
