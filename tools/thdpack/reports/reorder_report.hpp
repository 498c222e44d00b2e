#pragma once
// What `thdpack reorder` prints: the setup, one line per window (rank 0) with the spread of
// per-rank vision cost before and after reordering (and after the reference longest-first
// assignment of the same costs), the samples and bytes moved and the exchange time with and
// without overlap (the slowest rank), then a summary.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "thdpack/comm/communicator.hpp"
#include "thdpack/multimodal/vl_workload.hpp"
#include "thdpack/pipeline/reorder_exchange.hpp"

namespace thdpack::cli {

/// One window of `thdpack reorder`, as rank 0 reports it.
struct ReorderWindowFigures {
  int64_t microbatches = 0;
  double spread_before = 0;       ///< mean over micro-batches of max/min per-rank vision cost
  double spread_after = 0;        ///< after this run's assignment
  double spread_reference = 0;    ///< after longest-first on the same costs
  double peak_after = 0;          ///< mean of max/mean per-rank vision cost after
  double cost_spread_before = 0;  ///< the same spread of the balanced cost (vision + text)
  double cost_spread_after = 0;
  int64_t samples = 0;
  int64_t samples_moved = 0;
  int64_t reference_moved = 0;  ///< samples longest-first would move
  int64_t bytes_moved = 0;
  double sync_seconds = 0;     ///< slowest rank's exchange()
  double exposed_seconds = 0;  ///< slowest rank's wait in finish() when overlapped
};

class ReorderReport {
 public:
  ReorderReport(Communicator& world, bool json) : world_(world), json_(json) {}

  void begin(const ReorderOptions& options, const VisionLanguageWorkload& workload,
             int64_t microbatches, double compute_ms);
  /// The same windows run synchronously and overlapped. Collective (one allreduce).
  void windows(const std::vector<ReorderWindowStats>& sync,
               const std::vector<ReorderWindowStats>& overlapped);
  /// Wall time of each mode and this rank's packed row lengths (empty without in-batch
  /// packing). Collective (one allreduce).
  void finish(double sync_wall_seconds, double overlapped_wall_seconds,
              const std::vector<int64_t>& packed_tokens);
  /// Rank 0 writes the windows as an HTML page (reorder_html_report.hpp) to `path`; other ranks
  /// do nothing. Call after finish(). InvalidArgument when the file cannot be written.
  void write_html(const std::string& path) const;

  struct Totals;  ///< the windows summed over the run (reorder_report.cpp)

 private:
  void print_json(const Totals& totals, std::optional<int64_t> longest_row) const;
  void print_text(const Totals& totals, std::optional<int64_t> longest_row) const;

  using WindowFigures = ReorderWindowFigures;

  Communicator& world_;
  bool json_;
  ReorderOptions options_;
  VisionLanguageWorkload workload_;
  int64_t groups_ = 1;
  std::vector<WindowFigures> windows_;
  int64_t microbatches_ = 0;
  double compute_ms_ = 0;
  double sync_wall_seconds_ = 0;
  double overlapped_wall_seconds_ = 0;
};

}  // namespace thdpack::cli
