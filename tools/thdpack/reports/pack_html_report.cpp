#include "reports/pack_html_report.hpp"

#include <algorithm>
#include <vector>

#include "reports/html_page.hpp"
#include "reports/svg_chart.hpp"
#include "reports/table.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::cli {
namespace {

constexpr int kFillBins = 20;  // 5% each: offline packs are mostly full

std::string bounds_section(const PackReportInput& in) {
  const int64_t packs = in.result.packs.count();
  BarChart chart;
  chart.id = "bounds";
  chart.y_label = "packs";
  chart.width = 420;
  std::vector<std::vector<std::string>> rows;
  for (const auto& [what, label, value] :
       std::vector<std::tuple<std::string, std::string, int64_t>>{
           {"l1", "L1 bound", in.result.lower_bound_l1},
           {"l2", "L2 bound", in.result.lower_bound_l2},
           {"packs", "packs", packs}}) {
    ChartBar bar;
    bar.label = label;
    bar.data = {{"what", what}};
    bar.segments.push_back({static_cast<double>(value),
                            label + ": " + std::to_string(value),
                            what == "packs" ? "count" : "bound-bar",
                            {}});
    chart.bars.push_back(std::move(bar));
    rows.push_back({label, std::to_string(value)});
  }
  const double over_l2 =
      in.result.lower_bound_l2 > 0
          ? static_cast<double>(packs) / static_cast<double>(in.result.lower_bound_l2) - 1
          : 0;
  return "<section id=\"bounds-section\"><h2>Packs against the lower bounds: " +
         percent(over_l2, 3) +
         " over L2</h2>\n<p>L1: padded tokens / C rounded up; L2: Martello and Toth's bound, "
         "which also counts samples longer than C/2 that cannot share a pack.</p>\n" +
         render_bar_chart(chart) + html_table({"", "packs"}, rows) + "</section>\n";
}

std::string fill_section(const PackReportInput& in) {
  const Bins& packs = in.result.packs;
  std::vector<int64_t> counts(kFillBins, 0);
  double lowest = 1;
  for (int64_t p = 0; p < packs.count(); ++p) {
    int64_t tokens = 0;
    for (int64_t i : packs.bin(p))
      tokens += round_up(in.lengths[static_cast<size_t>(i)], in.divisor);
    const double fill = static_cast<double>(tokens) / static_cast<double>(in.capacity);
    lowest = std::min(lowest, fill);
    counts[static_cast<size_t>(std::clamp(static_cast<int>(fill * kFillBins), 0, kFillBins - 1))]++;
  }
  BarChart chart;
  chart.id = "fill";
  chart.y_label = "packs";
  std::vector<std::vector<std::string>> rows;
  for (int b = 0; b < kFillBins; ++b) {
    const std::string range =
        std::to_string(b * 100 / kFillBins) + "-" + std::to_string((b + 1) * 100 / kFillBins) + "%";
    const int64_t n = counts[static_cast<size_t>(b)];
    ChartBar bar;
    bar.label = std::to_string(b * 100 / kFillBins);
    bar.data = {{"bin", std::to_string(b)}};
    bar.segments.push_back(
        {static_cast<double>(n), std::to_string(n) + " packs " + range + " full", "fill", {}});
    chart.bars.push_back(std::move(bar));
    if (n > 0) rows.push_back({range, std::to_string(n)});
  }
  return "<section id=\"fill-section\"><h2>Pack fill: " + percent(in.result.fill, 3) +
         " overall, emptiest pack " + percent(lowest, 1) +
         "</h2>\n<p>Packs by padded tokens / C, in bins of 5% (labels: the bin's lower "
         "edge).</p>\n" +
         render_bar_chart(chart) +
         html_details("numbers: fill", html_table({"fill", "packs"}, rows)) + "</section>\n";
}

std::string padding_section(const PackReportInput& in) {
  int64_t real = 0;
  for (int64_t p = 0; p < in.result.packs.count(); ++p) {
    for (int64_t i : in.result.packs.bin(p)) real += in.lengths[static_cast<size_t>(i)];
  }
  const double allocated =
      static_cast<double>(in.result.packs.count()) * static_cast<double>(in.capacity);
  const auto padding = static_cast<double>(in.result.padded_tokens - real);
  const double unused = allocated - static_cast<double>(in.result.padded_tokens);
  BarChart chart;
  chart.id = "padding";
  chart.y_label = "tokens";
  chart.width = 320;
  chart.bars.push_back(token_use_bar("packs x C", real, in.result.padded_tokens, allocated));
  return "<section id=\"padding-section\"><h2>Real tokens, padding, unused capacity</h2>\n" +
         render_bar_chart(chart) +
         html_table({"real", "padding", "unused", "unused share"},
                    {{std::to_string(real), fixed(padding, 0), fixed(unused, 0),
                      percent(allocated > 0 ? unused / allocated : 0, 3)}}) +
         "</section>\n";
}

}  // namespace

void write_pack_html_report(const std::string& path, const PackReportInput& input) {
  const std::string settings = html_settings(
      {{"source", input.source},
       {"samples", std::to_string(input.lengths.size()) + " (" +
                       std::to_string(input.result.padded_tokens) + " padded tokens)"},
       {"packs", "capacity C=" + std::to_string(input.capacity) + ", padding divisor " +
                     std::to_string(input.divisor)},
       {"strategy", input.strategy}});
  write_html_page(path, "thdpack pack", {{"packs", std::to_string(input.result.packs.count())}},
                  settings + bounds_section(input) + fill_section(input) + padding_section(input));
}

}  // namespace thdpack::cli
