#pragma once
// The skeleton the CLI's HTML reports share (`plan --report`, `pack --report`): one self-contained
// page with inline CSS and a few lines of inline script, nothing fetched. The script outlines the
// chart segment under the pointer, shows its <title> in a corner box, and finally sets
// document.body.dataset.rendered = "ok", which tests read back to know it ran without error.

#include <cstdint>
#include <string>
#include <vector>

#include "reports/svg_chart.hpp"

namespace thdpack::cli {

/// An HTML table; every cell is escaped. `row_classes[r]`, when given and not empty, is row r's
/// class.
std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows,
                       const std::vector<std::string>& row_classes = {});

/// A collapsed block: `summary` (escaped) opens `body` (HTML).
std::string html_details(const std::string& summary, const std::string& body);

/// A <dl> of the run's settings: (name, value) pairs, escaped.
std::string html_settings(const std::vector<std::pair<std::string, std::string>>& settings);

/// A bar stacked from the real tokens, the padding to the divisor and the capacity no sample uses,
/// of `allocated` token slots holding `padded` padded tokens (segments carry data-part="real",
/// "padding", "unused").
ChartBar token_use_bar(const std::string& label, int64_t real, int64_t padded, double allocated);

/// Writes the page: `title` (escaped), data-* attributes on <body>, and `body` (HTML). Throws
/// InvalidArgument when `path` cannot be written.
void write_html_page(const std::string& path, const std::string& title,
                     const DataAttributes& body_data, const std::string& body);

}  // namespace thdpack::cli
