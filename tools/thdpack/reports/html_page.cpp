#include "reports/html_page.hpp"

#include <sstream>

#include "reports/table.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/output_file.hpp"

namespace thdpack::cli {
namespace {

constexpr const char* kStyle = R"(
body { font: 14px/1.4 sans-serif; margin: 24px; color: #222; max-width: 1000px; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ccc; }
h3 { font-size: 14px; margin: 16px 0 4px; }
dl.run { display: grid; grid-template-columns: 90px auto; margin: 0; }
dl.run dt { color: #666; } dl.run dd { margin: 0; }
table { border-collapse: collapse; margin: 6px 0; font-variant-numeric: tabular-nums;
        display: block; max-width: 100%; overflow-x: auto; }
th, td { padding: 2px 10px; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.straggler td { color: #b00020; font-weight: bold; }
details summary { cursor: pointer; color: #555; }
svg.chart { display: block; max-width: 100%; height: auto; }
.row { display: flex; flex-wrap: wrap; gap: 8px; }
svg .grid { stroke: #eee; } svg .axis { stroke: #888; }
svg text { font-size: 11px; fill: #444; }
svg .mb { fill: #4e79a7; } svg .mb.alt { fill: #7ea6d1; } svg .bubble { fill: #bbb; }
svg .straggler .mb { fill: #d62728; } svg .straggler .mb.alt { fill: #ef7d7e; }
svg .count, svg .fill, svg .cpwork { fill: #59a14f; } svg .bound-bar { fill: #999; }
svg .real { fill: #4e79a7; } svg .padding { fill: #f28e2b; } svg .unused { fill: #ddd; }
svg .marker { stroke: #000; stroke-width: 2; }
svg .hline line { stroke-dasharray: 4 3; } svg .hline.bound line { stroke: #000; }
svg .hline.mean line { stroke: #888; }
svg rect.hover { opacity: 0.6; }
.straggler-key { color: #d62728; font-weight: bold; }
#hover { position: fixed; right: 12px; top: 12px; background: #fff; border: 1px solid #ccc;
         padding: 4px 8px; }
#hover:empty { display: none; }
)";

// Hover: the segment under the pointer is outlined and its title shown in a corner box.
constexpr const char* kScript = R"(
(function () {
  var box = document.getElementById('hover');
  document.querySelectorAll('svg.chart rect.segment').forEach(function (r) {
    r.addEventListener('mouseenter', function () {
      r.classList.add('hover');
      var t = r.querySelector('title');
      box.textContent = t ? t.textContent : r.dataset.value;
    });
    r.addEventListener('mouseleave', function () { r.classList.remove('hover'); });
  });
  document.body.dataset.rendered = 'ok';
})();
)";

}  // namespace

std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::vector<std::string>& row_classes) {
  std::ostringstream out;
  out << "<table><thead><tr>";
  for (const auto& h : header) out << "<th>" << html_escape(h) << "</th>";
  out << "</tr></thead><tbody>\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    out << "<tr"
        << (r < row_classes.size() && !row_classes[r].empty()
                ? " class=\"" + html_escape(row_classes[r]) + "\""
                : std::string())
        << ">";
    for (const auto& cell : rows[r]) out << "<td>" << html_escape(cell) << "</td>";
    out << "</tr>\n";
  }
  out << "</tbody></table>\n";
  return out.str();
}

std::string html_details(const std::string& summary, const std::string& body) {
  return "<details><summary>" + html_escape(summary) + "</summary>\n" + body + "</details>\n";
}

std::string html_settings(const std::vector<std::pair<std::string, std::string>>& settings) {
  std::string out = "<dl class=\"run\">";
  for (const auto& [name, value] : settings)
    out += "<dt>" + html_escape(name) + "</dt><dd>" + html_escape(value) + "</dd>";
  return out + "</dl>\n";
}

ChartBar token_use_bar(const std::string& label, int64_t real, int64_t padded, double allocated) {
  const auto padding = static_cast<double>(padded - real);
  const double unused = allocated - static_cast<double>(padded);
  ChartBar bar;
  bar.label = label;
  bar.segments = {
      {static_cast<double>(real),
       "real tokens: " + std::to_string(real),
       "real",
       {{"part", "real"}}},
      {padding, "padding to the divisor: " + fixed(padding, 0), "padding", {{"part", "padding"}}},
      {unused,
       "unused capacity: " + fixed(unused, 0) + " (" +
           percent(allocated > 0 ? unused / allocated : 0, 2) + ")",
       "unused",
       {{"part", "unused"}}}};
  return bar;
}

void write_html_page(const std::string& path, const std::string& title,
                     const DataAttributes& body_data, const std::string& body) {
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>"
      << html_escape(title) << "</title>\n<style>" << kStyle << "</style></head>\n<body";
  for (const auto& [name, value] : body_data)
    out << " data-" << name << "=\"" << html_escape(value) << '"';
  out << ">\n<div id=\"hover\"></div>\n<h1>" << html_escape(title) << "</h1>\n"
      << body << "<script>" << kScript << "</script>\n</body></html>\n";
  // Through OutputFile: an input is never replaced, and a failed write leaves what was there.
  const std::string page = out.str();
  OutputFile file(path);
  file.write(page.data(), page.size());
  file.commit();
}

}  // namespace thdpack::cli
