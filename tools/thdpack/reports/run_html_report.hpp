#pragma once
// `thdpack run --report FILE.html` (rank 0): the run as one self-contained page (html_page.hpp):
// per step, the modeled time of every DP replica over the step's lower bound for the run's
// scheduler and for dp_balanced on the same batch (straggler marked), the modeled step against the
// bound, bytes exchanged against the minimum, and the slowest rank's wall time. Drawn values are in
// data-* attributes (data-step, data-scheduler, data-replica, data-part, data-value).

#include <string>
#include <utility>
#include <vector>

#include "reports/run_report.hpp"

namespace thdpack::cli {

struct RunReportInput {
  std::vector<std::pair<std::string, std::string>> settings;  ///< shown at the top
  std::string scheduler;
  const std::vector<RunStepFigures>& steps;
};

/// Writes the page to `path`. Throws InvalidArgument when the file cannot be written.
void write_run_html_report(const std::string& path, const RunReportInput& input);

}  // namespace thdpack::cli
