#include "reports/pack_html_report.hpp"

#include <algorithm>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "reports/html_page.hpp"
#include "reports/svg_chart.hpp"
#include "reports/table.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack::cli {
namespace {

constexpr int kFillBins = 20;  // 5% each: offline packs are mostly full

// The bounds and the pack count differ by a few packs out of thousands: bars of the counts
// themselves would look identical, so the bars are the excess over the L1 bound.
std::string bounds_section(const PackReportInput& in) {
  const int64_t packs = in.result.packs.count();
  const int64_t l1 = in.result.lower_bound_l1;
  BarChart chart;
  chart.id = "bounds";
  chart.y_label = "packs over L1";
  chart.width = 420;
  chart.value_labels = true;
  std::vector<std::vector<std::string>> rows;
  for (const auto& [what, label, value] :
       std::vector<std::tuple<std::string, std::string, int64_t>>{
           {"l1", "L1 bound", l1},
           {"l2", "L2 bound", in.result.lower_bound_l2},
           {"packs", "packs", packs}}) {
    ChartBar bar;
    bar.label = label + " " + std::to_string(value);
    bar.data = {{"what", what}, {"count", std::to_string(value)}};
    bar.segments.push_back(
        {static_cast<double>(value - l1),
         label + ": " + std::to_string(value) + " (L1 + " + std::to_string(value - l1) + ")",
         what == "packs" ? "count" : "bound-bar",
         {}});
    chart.bars.push_back(std::move(bar));
    rows.push_back({label, std::to_string(value), std::to_string(value - l1)});
  }
  const double over_l2 =
      in.result.lower_bound_l2 > 0
          ? static_cast<double>(packs) / static_cast<double>(in.result.lower_bound_l2) - 1
          : 0;
  // Packs at the L1 bound leave every bar empty: say so instead of drawing nothing.
  const std::string picture =
      packs == l1 ? "<p class=\"note\">The packs meet the L1 bound: nothing to draw.</p>\n"
                  : render_bar_chart(chart);
  return "<section id=\"bounds-section\"><h2>Packs against the lower bounds: " +
         percent(over_l2, 3) + " over L2 (" + std::to_string(packs - in.result.lower_bound_l2) +
         " packs)</h2>\n<p>L1: padded tokens / C rounded up; L2: Martello and Toth's bound, "
         "which also counts samples longer than C/2 that cannot share a pack. Bars: packs above "
         "L1 = " +
         std::to_string(l1) + ".</p>\n" + picture + html_table({"", "packs", "over L1"}, rows) +
         "</section>\n";
}

/// A histogram of `values` in `bins` equal bins over [0, top], counts on a log scale; `what`
/// names the values in the title and hover text.
std::string histogram_section(const std::string& id, const std::string& heading,
                              const std::string& what, std::span<const int64_t> values, int64_t top,
                              int bins) {
  top = std::max<int64_t>(top, 1);
  bins = static_cast<int>(std::min<int64_t>(bins, top));
  const int64_t width = (top + bins - 1) / bins;
  std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
  for (int64_t v : values) {
    counts[static_cast<size_t>(std::clamp<int64_t>((v - 1) / width, 0, bins - 1))]++;
  }
  BarChart chart;
  chart.id = id;
  chart.y_label = "count (log)";
  chart.height = 180;
  chart.log_scale = true;
  chart.value_labels = true;
  std::vector<std::vector<std::string>> rows;
  for (int b = 0; b < bins; ++b) {
    const int64_t low = b * width + 1, high = (b + 1) * width;
    const std::string range =
        low == high ? std::to_string(low) : std::to_string(low) + "-" + std::to_string(high);
    const int64_t n = counts[static_cast<size_t>(b)];
    ChartBar bar;
    bar.label = scaled(static_cast<double>(low));
    bar.data = {{"histogram", id}, {"low", std::to_string(low)}, {"high", std::to_string(high)}};
    bar.segments.push_back(
        {static_cast<double>(n), std::to_string(n) + " " + what + " " + range, "fill", {}});
    chart.bars.push_back(std::move(bar));
    if (n > 0) rows.push_back({range, std::to_string(n)});
  }
  return "<section id=\"" + id + "-section\"><h2>" + heading + "</h2>\n" + render_bar_chart(chart) +
         html_details("numbers: " + heading, html_table({"range", "count"}, rows)) + "</section>\n";
}

std::string samples_per_pack_section(const PackReportInput& in) {
  std::vector<int64_t> counts;
  int64_t most = 1;
  for (int64_t p = 0; p < in.result.packs.count(); ++p) {
    counts.push_back(static_cast<int64_t>(in.result.packs.bin(p).size()));
    most = std::max(most, counts.back());
  }
  return histogram_section("samples-per-pack", "Samples per pack", "packs holding", counts, most,
                           32);
}

std::string length_section(const PackReportInput& in) {
  return histogram_section("lengths", "Sample lengths (tokens, up to C)", "samples of length",
                           in.lengths, in.capacity, 32);
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
  chart.y_label = "packs (log)";
  chart.log_scale = true;  // one half-empty pack stays visible beside thousands of full ones
  chart.value_labels = true;
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
         "edge); counts on a log scale.</p>\n" +
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
                  settings + bounds_section(input) + fill_section(input) +
                      samples_per_pack_section(input) + length_section(input) +
                      padding_section(input));
}

}  // namespace thdpack::cli
