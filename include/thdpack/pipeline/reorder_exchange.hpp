#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// The intra-microbatch reordering exchange over one module's DP group (SPEC §8): each rank brings
// its shard of W global micro-batches (a window), and leaves with the samples of its canonical
// groups (reorder.hpp), so every rank carries about the same vision cost.
//
// Per window: one allgather of fixed-size per-sample metadata (id, cost, shapes) over the DP
// group, the assignment computed identically on every rank, and one alltoallv of serialized
// samples (fields in sorted key order, 8-byte aligned, no headers: every size comes from the
// gathered metadata). Samples that stay on their rank never touch the wire. A DP group of one
// rank permutes locally. Every exchange checks that the bytes consumed equal the bytes received
// from each peer and that each output slot holds exactly its sample (InternalError otherwise).
//
// Overlap: start() runs the exchange of a window on a background thread while the caller works on
// the previous one; finish() waits for it. Between start() and finish() the caller must not use
// the DP group's communicator; with MPI, nothing else may call MPI concurrently either, and MPI
// must be initialised with at least MPI_THREAD_SERIALIZED (checked: InvalidArgument otherwise).
//
// Collective order: exchange(), and each start()/finish() pair, are collectives over the DP group;
// every rank calls them in the same order with windows of the same number of micro-batches.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "thdpack/comm/communicator.hpp"
#include "thdpack/multimodal/reorder.hpp"

namespace thdpack {

struct ReorderOptions {
  ReorderCost cost;
  AssignmentOptions assignment;
  /// DP sizes of every module that must agree on the assignment (vision and language, say); this
  /// group's size must be among them. Empty: just this group's size.
  std::vector<int> module_dp_sizes;
  /// B: samples per global micro-batch over the whole module (each rank holds B / dp).
  int64_t microbatch_size = 0;
  /// W: micro-batches per exchange (>= 1).
  int window = 1;
  /// false: every rank keeps its own shard (scalable reads without rebalancing); nothing moves.
  bool reorder = true;
  /// Check every sample's vision data against its placeholders (check_vision_fields) before it
  /// leaves its reader.
  bool check_vision = true;
  /// The most bytes any rank may send or receive in one window (1 to 2^31 - 1, the most one MPI
  /// alltoallv carries). A window over it is refused on every rank before anything moves; lower
  /// it to bound the exchange's memory.
  int64_t max_exchange_bytes = std::numeric_limits<int32_t>::max();
};

/// InvalidArgument unless the options suit a DP group of `dp` ranks: valid cost weights (see
/// validate(ReorderCost, bool)), window >= 1, max_exchange_bytes in range, dp among the module DP
/// sizes, and B a positive multiple of G = lcm(module DP sizes). ReorderExchange's constructor
/// calls it.
void validate(const ReorderOptions& options, int dp);

/// Figures of one window, identical on every rank (computed from the gathered metadata), except
/// exchange_seconds, which is this rank's own.
struct ReorderWindowStats {
  int64_t microbatches = 0;
  /// [micro-batch][rank]: vision cost (vision_weight · patches) of each rank's samples before and
  /// after reordering.
  std::vector<std::vector<double>> vision_cost_before;
  std::vector<std::vector<double>> vision_cost_after;
  /// Mean over the window's micro-batches of max/min per-rank vision cost (+inf when a rank has
  /// none; 1 when every rank has none).
  double spread_before = 1;
  double spread_after = 1;
  /// The same for the balanced cost (vision and text weights).
  double cost_spread_before = 1;
  double cost_spread_after = 1;
  /// [micro-batch][position]: every sample's balanced cost and vision cost (from the metadata).
  std::vector<std::vector<double>> sample_costs;
  std::vector<std::vector<double>> sample_vision_costs;
  int64_t samples_moved = 0;  ///< samples that changed rank, over the group
  int64_t bytes_moved = 0;    ///< serialized bytes sent, over the group
  /// This rank: seconds spent in exchange(), or blocked in finish() (the exposed part).
  double exchange_seconds = 0;
};

struct ReorderedWindow {
  /// This rank's samples of each micro-batch: its groups in order, each group's samples by
  /// increasing position.
  std::vector<std::vector<MultimodalSample>> microbatches;
  /// Their positions in the global micro-batch, alike.
  std::vector<std::vector<int64_t>> positions;
  ReorderWindowStats stats;
};

class ReorderExchange {
 public:
  /// Validates the options (weights, window >= 1, B a multiple of G and of the group size) on
  /// construction; not a collective.
  ReorderExchange(Communicator& dp_group, SampleSchema schema, ReorderOptions options);
  /// Waits for a window still in flight (its result is dropped).
  ~ReorderExchange();
  ReorderExchange(const ReorderExchange&) = delete;
  ReorderExchange& operator=(const ReorderExchange&) = delete;

  /// Synchronous: `shards[k]` is this rank's B/dp samples of micro-batch k, in position order
  /// (shard_positions); 1 <= shards.size() <= window. Returns this rank's reordered samples.
  ReorderedWindow exchange(std::vector<std::vector<MultimodalSample>> shards);

  /// Overlapped: starts exchanging `shards` in the background (at most one window in flight;
  /// InvalidArgument otherwise).
  void start(std::vector<std::vector<MultimodalSample>> shards);
  /// Waits for the window of the last start() and returns it; rethrows its error.
  ReorderedWindow finish();
  bool in_flight() const;

  /// Collective, in place of exchange(): this rank could not produce its window (for example its
  /// input failed to convert). Every DP rank's matching exchange() or fail() raises
  /// InvalidArgument naming this rank and `message`, so no peer waits in a collective. Always
  /// throws; InvalidArgument while a window is in flight (finish() it first).
  [[noreturn]] void fail(const std::string& message);

  const ReorderOptions& options() const;
  /// G, the canonical groups per micro-batch.
  int64_t groups() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace thdpack
