#include "reports/reorder_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>

#include "reports/json_output.hpp"
#include "reports/reorder_html_report.hpp"
#include "reports/table.hpp"

namespace thdpack::cli {
namespace {

/// max / min of per-rank costs: 1 when all are 0, +inf when only some are.
double spread(const std::vector<double>& per_rank) {
  const auto [lo, hi] = std::minmax_element(per_rank.begin(), per_rank.end());
  if (*hi <= 0) return 1.0;
  if (*lo <= 0) return std::numeric_limits<double>::infinity();
  return *hi / *lo;
}

/// max / mean of per-rank costs (1 when all are 0): the step time over the balanced ideal.
double peak(const std::vector<double>& per_rank) {
  double sum = 0;
  for (double c : per_rank) sum += c;
  const double hi = *std::max_element(per_rank.begin(), per_rank.end());
  return sum > 0 ? hi * static_cast<double>(per_rank.size()) / sum : 1.0;
}

/// One micro-batch under the reference longest-first assignment of the same costs.
struct ReferenceOutcome {
  std::vector<double> vision_per_rank;
  int64_t samples_moved = 0;  ///< owned by another rank than the one that read them
};

ReferenceOutcome reference_outcome(const std::vector<double>& costs,
                                   const std::vector<double>& vision, int64_t groups, int dp) {
  AssignmentOptions o;
  o.method = AssignmentMethod::kLongestFirst;
  const GroupAssignment a = assign_groups(costs, groups, o);
  const auto shard = static_cast<int64_t>(costs.size()) / dp;
  ReferenceOutcome out;
  out.vision_per_rank.assign(static_cast<size_t>(dp), 0.0);
  for (int r = 0; r < dp; ++r) {
    const GroupRange mine = owned_groups(groups, dp, r);
    for (int64_t g = mine.begin; g < mine.end; ++g) {
      for (int64_t p : a.members[static_cast<size_t>(g)]) {
        out.vision_per_rank[static_cast<size_t>(r)] += vision[static_cast<size_t>(p)];
        if (p / shard != r) ++out.samples_moved;
      }
    }
  }
  return out;
}

std::string ratio_text(double r) {
  return std::isfinite(r) ? fixed(r, 3) + "x" : "inf";
}

nlohmann::json finite_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

const char* method_name(const ReorderOptions& o) {
  if (!o.reorder) return "none (scalable reads only)";
  return o.assignment.method == AssignmentMethod::kRefined ? "refined" : "longest-first";
}

/// The module DP sizes, "2,4".
std::string modules_text(const ReorderOptions& o) {
  std::string text;
  for (int d : o.module_dp_sizes) {
    if (!text.empty()) text += ',';
    text += std::to_string(d);
  }
  return text;
}

}  // namespace

void ReorderReport::begin(const ReorderOptions& options, const VisionLanguageWorkload& w,
                          int64_t microbatches, double compute_ms) {
  options_ = options;
  workload_ = w;
  microbatches_ = microbatches;
  compute_ms_ = compute_ms;
  groups_ = canonical_groups(options.module_dp_sizes);
  if (world_.rank() != 0 || json_) return;
  const std::string modules = modules_text(options);
  std::cout << "workload   synthetic vision-language, seed " << w.seed << ": "
            << fixed(100 * w.text_only_fraction, 0) << "% text-only, " << fixed(w.mean_images, 2)
            << " images per image sample (max " << w.max_images << "), sides " << w.min_side << ".."
            << w.max_side << " merged tokens, merge " << w.spatial_merge_size << '\n'
            << "layout     DP group of " << world_.size() << " MPI ranks; module DP sizes "
            << modules << " -> G = " << groups_ << " canonical groups\n"
            << "batches    " << microbatches << " global micro-batches of "
            << options.microbatch_size << " samples, windows of " << options.window
            << ", assignment " << method_name(options) << ", cost " << options.cost.vision_weight
            << "*patches + " << options.cost.text_weight << "*tokens, simulated compute "
            << compute_ms << " ms per micro-batch\n\n";
  std::printf("%6s %4s %10s %10s %10s %9s %7s %10s %10s %10s\n", "window", "mb", "spread in",
              "after", "ref LPT", "max/mean", "moved", "bytes", "sync ms", "overlap ms");
}

void ReorderReport::windows(const std::vector<ReorderWindowStats>& sync,
                            const std::vector<ReorderWindowStats>& overlapped) {
  // Exchange times are per rank: the slowest rank decides.
  std::vector<double> seconds;
  for (size_t k = 0; k < sync.size(); ++k) {
    seconds.push_back(sync[k].exchange_seconds);
    seconds.push_back(k < overlapped.size() ? overlapped[k].exchange_seconds : 0.0);
  }
  world_.allreduce(seconds, ReduceOp::kMax);
  if (world_.rank() != 0) return;
  const int dp = world_.size();
  for (size_t k = 0; k < sync.size(); ++k) {
    const ReorderWindowStats& s = sync[k];
    WindowFigures f;
    f.microbatches = s.microbatches;
    for (int64_t m = 0; m < s.microbatches; ++m) {
      const auto mb = static_cast<size_t>(m);
      f.spread_before += spread(s.vision_cost_before[mb]);
      f.spread_after += spread(s.vision_cost_after[mb]);
      f.peak_after += peak(s.vision_cost_after[mb]);
      const ReferenceOutcome ref =
          reference_outcome(s.sample_costs[mb], s.sample_vision_costs[mb], groups_, dp);
      f.spread_reference += spread(ref.vision_per_rank);
      f.reference_moved += ref.samples_moved;
      f.samples += static_cast<int64_t>(s.sample_costs[mb].size());
    }
    const auto n = static_cast<double>(std::max<int64_t>(1, s.microbatches));
    f.spread_before /= n;
    f.spread_after /= n;
    f.spread_reference /= n;
    f.peak_after /= n;
    f.cost_spread_before = s.cost_spread_before;
    f.cost_spread_after = s.cost_spread_after;
    f.samples_moved = s.samples_moved;
    f.bytes_moved = s.bytes_moved;
    f.sync_seconds = seconds[2 * k];
    f.exposed_seconds = seconds[2 * k + 1];
    windows_.push_back(f);
    if (!json_) {
      std::printf("%6zu %4lld %10s %10s %10s %9s %3lld/%-3lld %8s MB %10.2f %10.2f\n", k,
                  static_cast<long long>(f.microbatches), ratio_text(f.spread_before).c_str(),
                  ratio_text(f.spread_after).c_str(), ratio_text(f.spread_reference).c_str(),
                  ratio_text(f.peak_after).c_str(), static_cast<long long>(f.samples_moved),
                  static_cast<long long>(f.samples), fixed(f.bytes_moved / 1e6, 2).c_str(),
                  1e3 * f.sync_seconds, 1e3 * f.exposed_seconds);
    }
  }
  if (!json_) std::fflush(stdout);
}

// The windows' figures over the whole run: spreads as means per micro-batch, counts as sums.
struct ReorderReport::Totals {
  double before = 0, after = 0, reference = 0, peak_after = 0, cost_before = 0, cost_after = 0;
  double sync = 0, exposed = 0;
  int64_t microbatches = 0, moved = 0, reference_moved = 0, samples = 0, bytes = 0;
};

namespace {

ReorderReport::Totals totals_of(const std::vector<ReorderWindowFigures>& windows) {
  ReorderReport::Totals t;
  for (const auto& w : windows) {
    const auto n = static_cast<double>(w.microbatches);
    t.before += w.spread_before * n;
    t.after += w.spread_after * n;
    t.reference += w.spread_reference * n;
    t.peak_after += w.peak_after * n;
    t.cost_before += w.cost_spread_before * n;
    t.cost_after += w.cost_spread_after * n;
    t.microbatches += w.microbatches;
    t.moved += w.samples_moved;
    t.reference_moved += w.reference_moved;
    t.samples += w.samples;
    t.bytes += w.bytes_moved;
    t.sync += w.sync_seconds;
    t.exposed += w.exposed_seconds;
  }
  const double per_mb = 1.0 / static_cast<double>(std::max<int64_t>(1, t.microbatches));
  for (double* mean :
       {&t.before, &t.after, &t.reference, &t.peak_after, &t.cost_before, &t.cost_after}) {
    *mean *= per_mb;
  }
  return t;
}

nlohmann::json window_json(const ReorderWindowFigures& w) {
  return {{"microbatches", w.microbatches},
          {"spread_before", finite_or_null(w.spread_before)},
          {"spread_after", finite_or_null(w.spread_after)},
          {"spread_reference", finite_or_null(w.spread_reference)},
          {"max_over_mean_after", w.peak_after},
          {"cost_spread_before", finite_or_null(w.cost_spread_before)},
          {"cost_spread_after", finite_or_null(w.cost_spread_after)},
          {"samples", w.samples},
          {"samples_moved", w.samples_moved},
          {"reference_samples_moved", w.reference_moved},
          {"bytes_moved", w.bytes_moved},
          {"sync_seconds", w.sync_seconds},
          {"overlapped_exposed_seconds", w.exposed_seconds}};
}

}  // namespace

void ReorderReport::finish(double sync_wall, double overlapped_wall,
                           const std::vector<int64_t>& packed_tokens) {
  int64_t longest_row = 0, tokens = 0;
  for (int64_t t : packed_tokens) {
    longest_row = std::max(longest_row, t);
    tokens += t;
  }
  std::vector<double> packing = {static_cast<double>(longest_row), static_cast<double>(tokens),
                                 static_cast<double>(packed_tokens.size())};
  world_.allreduce(packing, ReduceOp::kMax);
  if (world_.rank() != 0) return;
  sync_wall_seconds_ = sync_wall;
  overlapped_wall_seconds_ = overlapped_wall;
  // Longest packed row over the ranks, when the shards were packed.
  const std::optional<int64_t> longest =
      packed_tokens.empty() ? std::nullopt : std::optional(static_cast<int64_t>(packing[0]));
  if (json_) {
    print_json(totals_of(windows_), longest);
  } else {
    print_text(totals_of(windows_), longest);
  }
}

void ReorderReport::print_json(const Totals& t, std::optional<int64_t> longest_row) const {
  nlohmann::json j;
  j["ranks"] = world_.size();
  j["groups"] = groups_;
  j["microbatch_size"] = options_.microbatch_size;
  j["window"] = options_.window;
  j["method"] = method_name(options_);
  j["microbatches"] = t.microbatches;
  j["workload"] = {{"seed", workload_.seed},
                   {"text_only_fraction", workload_.text_only_fraction},
                   {"mean_images", workload_.mean_images},
                   {"max_images", workload_.max_images},
                   {"min_side", workload_.min_side},
                   {"max_side", workload_.max_side},
                   {"spatial_merge_size", workload_.spatial_merge_size}};
  j["spread_before_mean"] = finite_or_null(t.before);
  j["spread_after_mean"] = finite_or_null(t.after);
  j["spread_reference_mean"] = finite_or_null(t.reference);
  j["max_over_mean_after"] = t.peak_after;
  j["cost_spread_before_mean"] = finite_or_null(t.cost_before);
  j["cost_spread_after_mean"] = finite_or_null(t.cost_after);
  j["samples"] = t.samples;
  j["samples_moved"] = t.moved;
  j["reference_samples_moved"] = t.reference_moved;
  j["bytes_moved"] = t.bytes;
  j["sync_exchange_seconds"] = t.sync;
  j["overlapped_exposed_seconds"] = t.exposed;
  j["sync_wall_seconds"] = sync_wall_seconds_;
  j["overlapped_wall_seconds"] = overlapped_wall_seconds_;
  if (longest_row) j["packed_row_tokens_max"] = static_cast<double>(*longest_row);
  nlohmann::json per = nlohmann::json::array();
  for (const auto& w : windows_) per.push_back(window_json(w));
  j["per_window"] = per;
  std::cout << json_text(j, 2) << '\n';
}

void ReorderReport::print_text(const Totals& t, std::optional<int64_t> longest_row) const {
  std::cout << "\nsummary    vision-cost spread (max/min over ranks, mean over " << t.microbatches
            << " micro-batches): " << ratio_text(t.before) << " -> " << ratio_text(t.after)
            << " (reference longest-first: " << ratio_text(t.reference) << "); slowest rank at "
            << ratio_text(t.peak_after) << " the mean after\n";
  if (options_.cost.text_weight > 0) {
    std::cout << "balanced   spread of the cost the assignment balances (vision + text): "
              << ratio_text(t.cost_before) << " -> " << ratio_text(t.cost_after) << '\n';
  }
  std::cout << "moved      " << t.moved << " of " << t.samples << " samples, "
            << fixed(static_cast<double>(t.bytes) / 1e6, 2) << " MB (longest-first would move "
            << t.reference_moved << ")\n"
            << "exchange   synchronous " << fixed(1e3 * t.sync, 2) << " ms in total, overlapped "
            << fixed(1e3 * t.exposed, 2) << " ms exposed; wall "
            << fixed(1e3 * sync_wall_seconds_, 1) << " ms vs "
            << fixed(1e3 * overlapped_wall_seconds_, 1) << " ms; identical batches\n";
  if (longest_row) {
    std::cout << "packing    each shard packed into one THD row; the longest has " << *longest_row
              << " tokens\n";
  }
}

void ReorderReport::write_html(const std::string& path) const {
  if (world_.rank() != 0) return;
  const std::string modules = modules_text(options_);
  const VisionLanguageWorkload& w = workload_;
  write_reorder_html_report(
      path,
      {{{"workload", "synthetic vision-language, seed " + std::to_string(w.seed) + ": " +
                         fixed(100 * w.text_only_fraction, 0) + "% text-only, " +
                         fixed(w.mean_images, 2) + " images per image sample (max " +
                         std::to_string(w.max_images) + "), sides " + std::to_string(w.min_side) +
                         ".." + std::to_string(w.max_side) + " merged tokens"},
        {"layout", "DP group of " + std::to_string(world_.size()) + " MPI ranks; module DP sizes " +
                       modules + " -> G = " + std::to_string(groups_) + " canonical groups"},
        {"batches", std::to_string(microbatches_) + " global micro-batches of " +
                        std::to_string(options_.microbatch_size) + " samples, windows of " +
                        std::to_string(options_.window)},
        {"assignment", method_name(options_)},
        {"compute", fixed(compute_ms_, 2) + " ms simulated per micro-batch"},
        {"wall", fixed(1e3 * sync_wall_seconds_, 1) + " ms synchronous, " +
                     fixed(1e3 * overlapped_wall_seconds_, 1) + " ms overlapped"}},
       method_name(options_),
       windows_});
}

}  // namespace thdpack::cli
