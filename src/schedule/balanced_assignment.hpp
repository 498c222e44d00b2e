#pragma once
// The state behind the "balanced" scheduler: items placed into K packs on each of dp replicas,
// with per-pack room, cost and item count and per-replica load, and the moves that improve it.

#include <cstdint>
#include <span>
#include <vector>

#include "schedule/room_index.hpp"
#include "schedule/schedule_items.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack::detail {

class BalancedAssignment {
 public:
  /// Which pack of a replica takes an item.
  enum class Fit {
    kWorst,  ///< the pack with the most room (spreads tokens over micro-batches)
    kTight,  ///< a pack with little room that fits (keeps big holes for big items): the least
             ///< room up to RoomIndex::kScanLimit packs per replica, else the first that fits
  };

  /// `items` must be ranked: by decreasing cost, ties by their original index, so that item i is
  /// the i-th to place. Walking items in that order reads every per-item array front to back,
  /// which keeps a million-item placement in the cache's prefetch stream.
  BalancedAssignment(const ScheduleItems& items, int dp, int64_t k, int64_t capacity);

  /// Longest-processing-time: items in rank order each go to the least loaded replica that has a
  /// pack with room, into the pack chosen by `fit`. False if an item fits nowhere (found as soon
  /// as the room left below the shortest item exceeds the packs' spare room). Call it on a fresh
  /// assignment, nothing placed yet.
  bool place_longest_first(Fit fit);

  /// Starts from a global packing (at most dp·K packs): packs in decreasing cost each go to the
  /// least loaded replica that has fewer than K. False if there are more than dp·K packs.
  bool place_packs(const Bins& packs);

  /// Makes every pack non-empty: replicas with fewer than K items take the cheapest movable item of
  /// the most loaded replica with a surplus; then a replica's empty packs take the cheapest item of
  /// its own fullest pack. False if there are fewer than dp·K items. Each move costs
  /// O(log dp + m + K) for the m items of a replica.
  bool fill_empty_packs();

  /// How much refinement may do: at most `max_transfers` improvements and `work` units of work
  /// (one unit is about one item examined or moved in memory), so its time is bounded by the
  /// budget whatever the input.
  struct RefineBudget {
    int64_t max_transfers = 0;
    int64_t work = 0;
  };

  /// Moves and swaps items between the most loaded replica and lighter ones while that lowers the
  /// maximum load, never breaking capacity or leaving a pack empty. Stops at `target` load, when no
  /// transfer helps, or when the budget is spent (a plan at every stop). Each step costs O(log dp)
  /// for the replica index plus, for every lighter replica tried, O(m (log m + probes)) for the m
  /// items of the heaviest.
  void refine(double target, const RefineBudget& budget);

  /// Modeled step cost in replica units: max over replicas of load + (pp-1)/pp · largest pack.
  double step_cost(int pp) const;

  /// The packs in plan order (pack k·dp + r is micro-batch k of replica r); each replica's
  /// micro-batches by decreasing cost. Items are given by `original[rank]`, in a pack by rank
  /// (plan_from_packs and plan_from_sample_packs put them in input order).
  PackLists packs(std::span<const int64_t> original) const;

 private:
  struct Transfer {
    double score = -1;  // |delta - gap/2|; < 0 means none found
    int64_t give = -1;  // item leaving the heavy replica
    int64_t take = -1;  // item coming back (swap) or -1 (move)
    int64_t to_bin = -1;
  };

  // Orders items by increasing cost, ties by decreasing index: the reverse of the placement order.
  struct Cheaper {
    const ScheduleItems* items;
    bool operator()(int64_t a, int64_t b) const {
      const double ca = items->costs[static_cast<size_t>(a)];
      const double cb = items->costs[static_cast<size_t>(b)];
      return ca < cb || (ca == cb && a > b);
    }
  };

  // Fills by_cost_ from the placement (kept up to date by put/take_out until cleared).
  void index_by_cost();
  int64_t bin_index(int replica, int64_t k) const { return static_cast<int64_t>(replica) * k_ + k; }
  int replica_of_bin(int64_t bin) const { return static_cast<int>(bin / k_); }
  // The bin of `replica` that `fit` picks for an item of `length`, or -1: O(1) for worst fit,
  // O(log K) for the tight fit (a scan of the K rooms up to RoomIndex::kScanLimit).
  int64_t choose_bin(int replica, int64_t length, Fit fit) const;
  void put(int64_t item, int64_t bin);
  // put() without the per-bin cost and count, for a placement pass (which reads neither): their
  // cache misses, one item after another, were most of a million-item pass. tally_bins() adds
  // them up afterwards, in one pass whose misses overlap.
  void place(int64_t item, int64_t bin);
  void tally_bins();
  void take_out(int64_t item);
  void move(int64_t item, int64_t bin);
  // The transfer from `heavy` to `light` closest to halving `gap`, stopping early at one close
  // enough; `scanned` counts the heavy items examined.
  Transfer find_transfer(int heavy, int light, double gap, int64_t& scanned) const;
  void apply(const Transfer& t);

  const ScheduleItems& items_;
  Cheaper cheaper_;
  int dp_;
  int64_t k_;
  int64_t capacity_;
  RoomIndex rooms_;                            // room per bin, and each replica's bins by room
  std::vector<double> bin_cost_;               // per bin
  std::vector<int64_t> bin_count_;             // per bin: items in it
  std::vector<double> load_;                   // per replica
  std::vector<int64_t> bin_of_;                // per item, -1 unplaced
  std::vector<std::vector<int64_t>> by_cost_;  // per replica, sorted by Cheaper (refine only)
};

}  // namespace thdpack::detail
