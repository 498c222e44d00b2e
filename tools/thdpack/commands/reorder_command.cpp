// `thdpack reorder`, started under mpirun: multimodal intra-microbatch reordering on a synthetic
// vision-language workload. Every rank reads only its shard of each global micro-batch, the DP
// group (the whole world) rebalances vision cost window by window, and a simulated compute step
// (a sleep proportional to the rank's cost) consumes each micro-batch. The windows run twice:
// synchronously and overlapped (the next window exchanged in the background); both must deliver
// identical batches. Per window: the spread of per-rank vision cost before and after (and what
// the reference longest-first assignment would give), samples and bytes moved, exchange time.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "commands.hpp"
#include "flags/flag_values.hpp"
#include "mpi/mpi_job.hpp"
#include "reports/progress.hpp"
#include "reports/reorder_report.hpp"
#include "thdpack/comm/mpi_communicator.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/multimodal/vl_workload.hpp"
#include "thdpack/pipeline/reorder_exchange.hpp"

namespace thdpack::cli {
namespace {

// Upper bounds of the workload flags: far beyond any real workload, small enough that sizes and
// costs computed from them stay well inside int64 and double.
constexpr double kMaxCostWeight = 1e12;
constexpr double kMaxComputeMs = 1e6;
constexpr int64_t kMaxImages = 1 << 16;
constexpr int64_t kMaxSide = 1 << 16;
constexpr int64_t kMaxTextTokens = int64_t{1} << 32;
constexpr int64_t kMaxPixelDim = 1 << 20;

struct ReorderFlags {
  VisionLanguageWorkload workload;
  int64_t microbatch_size = 0;  // 0: 8 per rank
  int64_t microbatches = 12;
  int window = 2;
  std::string method = "refined";
  std::string module_dp_sizes;  // "2,4"
  bool no_reorder = false;
  double vision_weight = 1.0;
  double text_weight = 0.0;
  double compute_ms = 20.0;
  int64_t pack_divisor = 0;  // > 0: pack each rank's shard into one THD row
  double timeout = 300;
  bool json = false;
  bool no_progress = false;
  std::string report;  // rank 0 writes an HTML page here
};

std::vector<int> parse_sizes(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      fail("--module-dp-sizes takes comma-separated integers, got '", text, "'");
    }
  }
  return out;
}

// Sleeps for this rank's share of the simulated compute of one micro-batch.
void compute(const ReorderFlags& f, double my_cost, double mean_cost) {
  if (f.compute_ms <= 0 || mean_cost <= 0) return;
  std::this_thread::sleep_for(
      std::chrono::duration<double, std::milli>(f.compute_ms * my_cost / mean_cost));
}

// An order-sensitive digest of the ids a rank holds, to compare the two modes.
uint64_t digest(const ReorderedWindow& w) {
  Hash64 h;
  for (const auto& mb : w.microbatches) {
    for (const MultimodalSample& s : mb) h.add(s.id);
    h.add(int64_t{-1});  // the end of a micro-batch
  }
  return h.digest();
}

struct ModeResult {
  std::vector<ReorderWindowStats> windows;
  std::vector<uint64_t> digests;
  double wall_seconds = 0;
  std::vector<int64_t> packed_tokens;  // per micro-batch, this rank's THD row length
};

ModeResult run_mode(MpiCommunicator& world, const ReorderFlags& f, const ReorderOptions& options,
                    bool overlap, Progress& progress) {
  ReorderExchange exchange(world, vl_schema(), options);
  const int64_t B = options.microbatch_size;
  auto read_window = [&](int64_t first) {
    std::vector<std::vector<MultimodalSample>> shards;
    const GroupRange mine = shard_positions(B, world.size(), world.rank());
    for (int64_t m = first; m < std::min(first + f.window, f.microbatches); ++m) {
      std::vector<MultimodalSample> shard;  // scalable DP: only this rank's positions are read
      for (int64_t p = mine.begin; p < mine.end; ++p)
        shard.push_back(vl_sample(f.workload, m * B + p));
      shards.push_back(std::move(shard));
    }
    return shards;
  };
  ModeResult out;
  auto consume = [&](const ReorderedWindow& w) {
    for (size_t k = 0; k < w.microbatches.size(); ++k) {
      const auto& after = w.stats.vision_cost_after[k];
      double mean = 0;
      for (double c : after) mean += c;
      mean /= static_cast<double>(after.size());
      if (f.pack_divisor > 0) {
        InBatchPackOptions po;
        po.divisor = f.pack_divisor;
        out.packed_tokens.push_back(
            static_cast<int64_t>(pack_language_shard(w.microbatches[k], po).tokens.size()));
      }
      compute(f, after[static_cast<size_t>(world.rank())], mean);
    }
    out.digests.push_back(digest(w));
    out.windows.push_back(w.stats);
    progress.advance();
  };
  world.barrier();
  const auto start = std::chrono::steady_clock::now();
  if (!overlap) {
    for (int64_t first = 0; first < f.microbatches; first += f.window) {
      consume(exchange.exchange(read_window(first)));
    }
  } else {
    exchange.start(read_window(0));
    for (int64_t first = 0; first < f.microbatches; first += f.window) {
      const ReorderedWindow current = exchange.finish();
      if (first + f.window < f.microbatches) exchange.start(read_window(first + f.window));
      consume(current);
    }
  }
  world.barrier();
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

int run(ReorderFlags f, int rank, int size) {
  // The communicator first: its creation is collective, so every rank gets past it before any
  // rank can fail on its own flags.
  MpiCommunicator world(MPI_COMM_WORLD, MpiOptions{.timeout_seconds = f.timeout});
  validate(f.workload);
  ReorderOptions o;
  o.cost = vl_cost(f.workload, f.vision_weight, f.text_weight);
  o.module_dp_sizes = parse_sizes(f.module_dp_sizes);
  if (o.module_dp_sizes.empty()) o.module_dp_sizes = {size};
  const int64_t groups = canonical_groups(o.module_dp_sizes);
  // Default: 8 samples per rank, rounded up to a multiple of G.
  o.microbatch_size = f.microbatch_size > 0 ? f.microbatch_size
                                            : (8 * int64_t{size} + groups - 1) / groups * groups;
  o.window = f.window;
  o.reorder = !f.no_reorder;
  if (f.method == "longest-first") {
    o.assignment.method = AssignmentMethod::kLongestFirst;
  } else if (f.method != "refined") {
    fail("--method must be 'refined' or 'longest-first', got '", f.method, "'");
  }
  if (f.microbatches < 1) throw InvalidArgument("--microbatches must be >= 1");
  validate(o, size);
  // Refused now, not after the run: every rank checks (the same answer on a shared filesystem).
  if (!f.report.empty()) {
    refuse_replacing_inputs(f.report);
    const std::filesystem::path folder = std::filesystem::path(f.report).parent_path();
    if (!folder.empty() && !std::filesystem::is_directory(folder)) {
      fail("cannot create '", f.report, "': no folder '", folder.string(), "'");
    }
  }

  ReorderReport report(world, f.json);
  report.begin(o, f.workload, f.microbatches, f.compute_ms);
  // Every window runs twice: without, then with the overlapped exchange.
  Progress progress("reordering", 2 * ((f.microbatches + f.window - 1) / f.window),
                    rank == 0 && !f.no_progress);
  const ModeResult sync = run_mode(world, f, o, false, progress);
  const ModeResult overlapped = run_mode(world, f, o, true, progress);
  progress.finish();
  if (sync.digests != overlapped.digests || sync.packed_tokens != overlapped.packed_tokens) {
    fail<InternalError>("reorder: rank ", rank,
                        " received different batches with and without overlap");
  }
  report.windows(sync.windows, overlapped.windows);
  report.finish(sync.wall_seconds, overlapped.wall_seconds, sync.packed_tokens);
  if (!f.report.empty()) {
    report.write_html(f.report);
    if (rank == 0 && !f.json) std::cout << "report written to " << f.report << '\n';
  }
  return 0;
}

}  // namespace

// The synthetic vision-language workload's flags.
void add_workload_flags(CLI::App& cmd, VisionLanguageWorkload& w) {
  cmd.add_option("--seed", w.seed, "workload seed")
      ->check(non_negative_integer())
      ->capture_default_str();
  cmd.add_option("--text-only-fraction", w.text_only_fraction, "samples without images")
      ->check(non_negative_number(1.0))
      ->capture_default_str();
  cmd.add_option("--mean-images", w.mean_images, "images per image-bearing sample")
      ->check(non_negative_number(kMaxImages))
      ->capture_default_str();
  cmd.add_option("--max-images", w.max_images)
      ->check(positive_integer(kMaxImages))
      ->capture_default_str();
  cmd.add_option("--min-side", w.min_side, "image side in merged tokens, smallest")
      ->check(positive_integer(kMaxSide))
      ->capture_default_str();
  cmd.add_option("--max-side", w.max_side, "image side in merged tokens, largest")
      ->check(positive_integer(kMaxSide))
      ->capture_default_str();
  cmd.add_option("--median-text-tokens", w.median_text_tokens)
      ->check(positive_integer(kMaxTextTokens))
      ->capture_default_str();
  cmd.add_option("--pixel-dim", w.pixel_dim, "float32 values per patch row")
      ->check(positive_integer(kMaxPixelDim))
      ->capture_default_str();
}

Command add_reorder_command(CLI::App& app) {
  auto f = std::make_shared<ReorderFlags>();
  auto* cmd = app.add_subcommand(
      "reorder",
      "multimodal intra-microbatch reordering under mpirun on a synthetic vision-language "
      "workload: per-window spread of per-rank vision cost before and after, samples and bytes "
      "moved, exchange time with and without overlap (the DP group is the whole world)");
  cmd->add_option("-B,--microbatch-size", f->microbatch_size,
                  "samples per global micro-batch (default 8 per rank; a multiple of G)")
      ->check(positive_integer());
  cmd->add_option("--microbatches", f->microbatches, "global micro-batches to run")
      ->check(positive_integer())
      ->capture_default_str();
  cmd->add_option("-W,--window", f->window, "micro-batches per exchange")
      ->check(positive_integer(std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--method", f->method, "refined (ours) or longest-first (the reference)")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_option("--module-dp-sizes", f->module_dp_sizes,
                  "DP sizes of every module that shares the assignment, e.g. 2,4 (G = their lcm; "
                  "default: the world size)")
      ->check(non_empty());
  cmd->add_flag("--no-reorder", f->no_reorder, "scalable reads only: nothing moves");
  cmd->add_option("--w-vision", f->vision_weight, "cost per image patch")
      ->check(non_negative_number(kMaxCostWeight))
      ->capture_default_str();
  cmd->add_option("--w-text", f->text_weight, "cost per real text token")
      ->check(non_negative_number(kMaxCostWeight))
      ->capture_default_str();
  cmd->add_option("--compute-ms", f->compute_ms,
                  "simulated compute per micro-batch at the mean cost (0: none)")
      ->check(non_negative_number(kMaxComputeMs))
      ->capture_default_str();
  cmd->add_option("--pack-divisor", f->pack_divisor,
                  "pack each rank's shard into one THD row padded per sample to this multiple")
      ->check(non_negative_integer())
      ->capture_default_str();
  add_workload_flags(*cmd, f->workload);
  cmd->add_option("--timeout", f->timeout,
                  "seconds a collective may take before it is reported as failed")
      ->check(positive_number(kMaxTimeoutSeconds))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "print the report as JSON (rank 0)");
  cmd->add_flag("--no-progress", f->no_progress, "no progress bar (rank 0, stderr)");
  cmd->add_option("--report", f->report,
                  "rank 0 writes a self-contained HTML page with pictures of the windows (vision-"
                  "cost spread before and after, samples and bytes moved, exchange time)")
      ->check(non_empty());
  return {cmd, [f] {
            // The overlapped exchange runs MPI on a background thread, one thread at a time.
            return run_mpi_job(MPI_THREAD_SERIALIZED, f->timeout,
                               [&](int rank, int size) { return run(*f, rank, size); });
          }};
}

}  // namespace thdpack::cli
