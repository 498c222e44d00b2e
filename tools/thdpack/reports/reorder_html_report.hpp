#pragma once
// `thdpack reorder --report FILE.html` (rank 0): the windows as one self-contained page
// (html_page.hpp): per window, the spread of per-rank vision cost before reordering, after it and
// after the reference longest-first assignment; the slowest rank over the mean after; the samples
// moved against what longest-first would move, and the bytes; the slowest rank's exchange time
// synchronous and exposed when overlapped. Drawn values are in data-* attributes (data-window,
// data-part, data-value; data-infinite="true" on a spread that is infinite, drawn as 0).

#include <string>
#include <utility>
#include <vector>

#include "reports/reorder_report.hpp"

namespace thdpack::cli {

struct ReorderReportInput {
  std::vector<std::pair<std::string, std::string>> settings;  ///< shown at the top
  std::string method;                                         ///< the assignment's name
  const std::vector<ReorderWindowFigures>& windows;
};

/// Writes the page to `path`. Throws InvalidArgument when the file cannot be written.
void write_reorder_html_report(const std::string& path, const ReorderReportInput& input);

}  // namespace thdpack::cli
