#pragma once
// `thdpack pack --report FILE.html`: the offline packing as one self-contained page
// (html_page.hpp): packs against the L1 and L2 lower bounds, a histogram of pack fill, and real
// tokens, padding and unused capacity, with the numbers in tables and data-* attributes (data-what,
// data-bin, data-part, data-value).

#include <cstdint>
#include <span>
#include <string>

#include "thdpack/packing/offline_packing.hpp"

namespace thdpack::cli {

struct PackReportInput {
  std::string source;    ///< the source's description
  std::string strategy;  ///< as the summary prints it
  int64_t capacity = 0;
  int64_t divisor = 1;
  std::span<const int64_t> lengths;  ///< real length of every packed sample, by index
  const OfflinePacking& result;
};

/// Writes the page to `path`. Throws InvalidArgument when the file cannot be written.
void write_pack_html_report(const std::string& path, const PackReportInput& input);

}  // namespace thdpack::cli
