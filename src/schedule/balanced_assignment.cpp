#include "schedule/balanced_assignment.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

namespace thdpack::detail {
namespace {

// Relative size below which a load difference is treated as noise (keeps refinement finite).
constexpr double kRelativeEpsilon = 1e-12;
// Swap partners examined on each side of the ideal one that do not fit before giving up.
constexpr int kProbesPerSide = 8;
// A transfer this close to the ideal (|delta - gap/2| <= gap · this) ends the search of a pair of
// replicas: it already brings the pair within gap/16 of each other, and a replica of 100k items
// need not be scanned to the end for a marginally better one.
constexpr double kCloseEnough = 1.0 / 32;

// The least loaded replica, as a tournament (winner) tree whose nodes hold the winner's key and
// index: updating one replica recomputes the log2(dp) matches on its path from the two children
// alone, with a branch-free select, which beats a heap whose data-dependent branches mispredict at
// every level. Ties go to the lower index. A replica can be set aside (key +inf) while the current
// item does not fit it.
class ReplicaTournament {
  struct Entry {
    double key;
    int64_t replica;
  };

 public:
  explicit ReplicaTournament(const std::vector<double>& load) {
    while (leaves_ < load.size()) leaves_ *= 2;
    tree_.assign(2 * leaves_, Entry{kNone, 0});
    for (size_t i = 0; i < leaves_; ++i) {
      tree_[leaves_ + i] = Entry{i < load.size() ? load[i] : kNone, static_cast<int64_t>(i)};
    }
    for (size_t node = leaves_ - 1; node >= 1; --node) tree_[node] = match(node);
  }
  int top() const { return static_cast<int>(tree_[1].replica); }
  bool exhausted() const { return tree_[1].key == kNone; }
  void set(int replica, double key) {
    size_t node = leaves_ + static_cast<size_t>(replica);
    tree_[node].key = key;
    for (node /= 2; node >= 1; node /= 2) tree_[node] = match(node);
  }
  void set_aside(int replica) { set(replica, kNone); }

 private:
  static constexpr double kNone = std::numeric_limits<double>::infinity();

  Entry match(size_t node) const {
    const Entry& a = tree_[2 * node];
    const Entry& b = tree_[2 * node + 1];
    // Select without a branch: the outcome is data-dependent and would mispredict half the time.
    const int64_t b_wins = -static_cast<int64_t>(b.key < a.key);
    return Entry{b.key < a.key ? b.key : a.key, a.replica ^ ((a.replica ^ b.replica) & b_wins)};
  }

  size_t leaves_ = 1;
  std::vector<Entry> tree_;
};

}  // namespace

BalancedAssignment::BalancedAssignment(const ScheduleItems& items, int dp, int64_t k,
                                       int64_t capacity)
    : items_(items),
      cheaper_{&items},
      dp_(dp),
      k_(k),
      capacity_(capacity),
      rooms_(dp, k, capacity),
      bin_cost_(static_cast<size_t>(dp * k), 0.0),
      bin_count_(static_cast<size_t>(dp * k), 0),
      load_(static_cast<size_t>(dp), 0.0),
      bin_of_(static_cast<size_t>(items.size()), -1) {}

int64_t BalancedAssignment::choose_bin(int replica, int64_t length, Fit fit) const {
  if (fit == Fit::kTight) return rooms_.tight_fit(replica, length);
  return rooms_.max_room(replica) >= length ? rooms_.roomiest(replica) : -1;
}

void BalancedAssignment::put(int64_t item, int64_t bin) {
  place(item, bin);
  const auto b = static_cast<size_t>(bin);
  bin_cost_[b] += items_.costs[static_cast<size_t>(item)];
  ++bin_count_[b];
  if (!by_cost_.empty()) {
    auto& list = by_cost_[static_cast<size_t>(replica_of_bin(bin))];
    list.insert(std::lower_bound(list.begin(), list.end(), item, cheaper_), item);
  }
}

void BalancedAssignment::place(int64_t item, int64_t bin) {
  const auto i = static_cast<size_t>(item);
  rooms_.set(bin, rooms_.room(bin) - items_.lengths[i]);
  load_[static_cast<size_t>(replica_of_bin(bin))] += items_.costs[i];
  bin_of_[i] = bin;
}

void BalancedAssignment::tally_bins() {
  // In rank order, as put() would have added them: the same sums, bit for bit.
  for (size_t i = 0; i < bin_of_.size(); ++i) {
    const auto b = static_cast<size_t>(bin_of_[i]);
    bin_cost_[b] += items_.costs[i];
    ++bin_count_[b];
  }
}

void BalancedAssignment::take_out(int64_t item) {
  const auto i = static_cast<size_t>(item);
  const int64_t bin = bin_of_[i];
  const auto b = static_cast<size_t>(bin);
  rooms_.set(bin, rooms_.room(bin) + items_.lengths[i]);
  bin_cost_[b] -= items_.costs[i];
  --bin_count_[b];
  load_[static_cast<size_t>(replica_of_bin(bin))] -= items_.costs[i];
  bin_of_[i] = -1;
  if (!by_cost_.empty()) {
    auto& sorted = by_cost_[static_cast<size_t>(replica_of_bin(bin))];
    sorted.erase(std::lower_bound(sorted.begin(), sorted.end(), item, cheaper_));
  }
}

void BalancedAssignment::move(int64_t item, int64_t bin) {
  take_out(item);
  put(item, bin);
}

bool BalancedAssignment::place_longest_first(Fit fit) {
  ReplicaTournament least_loaded(load_);
  // Replicas set aside because an item did not fit them, by the most room they have: one comes back
  // as soon as an item fits it, and while aside it takes nothing, so its room stays as it was.
  // With items longest first, a replica is set aside at most once per item it receives: the walk
  // costs O((n + dp) log dp), however full the packs are. (Grouped items come by cost, not length:
  // there a replica can be set aside and restored repeatedly.)
  std::priority_queue<std::pair<int64_t, int>> aside;
  // Room left in a pack below the shortest item is lost for good (rooms only shrink here); once
  // more is lost than the packs have to spare, some item cannot fit and the pass stops at once
  // instead of placing nearly every item first.
  __extension__ using Int128 = __int128;
  Int128 spare = Int128{dp_} * k_ * capacity_;
  int64_t shortest = capacity_;
  for (int64_t length : items_.lengths) {
    spare -= length;
    shortest = std::min(shortest, length);
  }
  Int128 lost = 0;
  for (int64_t item = 0; item < items_.size(); ++item) {
    const int64_t length = items_.lengths[static_cast<size_t>(item)];
    while (!aside.empty() && aside.top().first >= length) {
      const int r = aside.top().second;
      aside.pop();
      least_loaded.set(r, load_[static_cast<size_t>(r)]);
    }
    bool placed = false;
    while (!least_loaded.exhausted()) {
      const int r = least_loaded.top();
      const int64_t bin = choose_bin(r, length, fit);
      if (bin >= 0) {
        place(item, bin);
        least_loaded.set(r, load_[static_cast<size_t>(r)]);
        placed = true;
        const int64_t left = rooms_.room(bin);
        if (left < shortest && (lost += left) > spare) return false;
        break;
      }
      least_loaded.set_aside(r);
      aside.emplace(rooms_.max_room(r), r);
    }
    if (!placed) return false;
  }
  tally_bins();
  return true;
}

bool BalancedAssignment::place_packs(const Bins& packs) {
  if (packs.count() > dp_ * k_) return false;
  std::vector<double> cost(static_cast<size_t>(packs.count()), 0.0);
  for (int64_t p = 0; p < packs.count(); ++p) {
    for (int64_t item : packs.bin(p))
      cost[static_cast<size_t>(p)] += items_.costs[static_cast<size_t>(item)];
  }
  std::vector<int64_t> order(static_cast<size_t>(packs.count()));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return cost[static_cast<size_t>(a)] > cost[static_cast<size_t>(b)];
  });
  // Each pack to the least loaded replica (ties: the lower index) that has fewer than K.
  std::vector<int64_t> used(static_cast<size_t>(dp_), 0);
  ReplicaTournament least_loaded(load_);
  for (int64_t p : order) {
    const int best = least_loaded.top();
    const int64_t bin = bin_index(best, used[static_cast<size_t>(best)]++);
    for (int64_t item : packs.bin(p)) put(item, bin);
    if (used[static_cast<size_t>(best)] == k_) {
      least_loaded.set_aside(best);
    } else {
      least_loaded.set(best, load_[static_cast<size_t>(best)]);
    }
  }
  return true;
}

void BalancedAssignment::index_by_cost() {
  // Walking the ranks backwards fills each replica's list already sorted by Cheaper.
  by_cost_.assign(static_cast<size_t>(dp_), {});
  for (int64_t item = items_.size() - 1; item >= 0; --item) {
    by_cost_[static_cast<size_t>(replica_of_bin(bin_of_[static_cast<size_t>(item)]))].push_back(
        item);
  }
}

bool BalancedAssignment::fill_empty_packs() {
  if (std::find(bin_count_.begin(), bin_count_.end(), 0) == bin_count_.end()) return true;
  if (items_.size() < dp_ * k_) return false;

  index_by_cost();
  std::vector<int64_t> counts(static_cast<size_t>(dp_), 0);  // items per replica
  for (int64_t bin = 0; bin < dp_ * k_; ++bin)
    counts[static_cast<size_t>(replica_of_bin(bin))] += bin_count_[static_cast<size_t>(bin)];
  // The cheapest item of `replica` (optionally of one bin) that shares its pack with another: the
  // first such in the replica's list by increasing cost.
  auto cheapest_movable = [&](int replica, int64_t only_bin) {
    for (int64_t item : by_cost_[static_cast<size_t>(replica)]) {
      const int64_t bin = bin_of_[static_cast<size_t>(item)];
      if (bin_count_[static_cast<size_t>(bin)] >= 2 && (only_bin < 0 || bin == only_bin)) {
        return item;
      }
    }
    return int64_t{-1};
  };
  // Packs only fill up here (a source keeps at least one item), so each replica's first empty pack
  // only moves forward.
  std::vector<int64_t> next_empty(static_cast<size_t>(dp_));
  for (int r = 0; r < dp_; ++r) next_empty[static_cast<size_t>(r)] = bin_index(r, 0);
  auto first_empty = [&](int replica) {
    int64_t& b = next_empty[static_cast<size_t>(replica)];
    for (const int64_t end = bin_index(replica, 0) + k_; b < end; ++b) {
      if (bin_count_[static_cast<size_t>(b)] == 0) return b;
    }
    return int64_t{-1};
  };

  // Donors: replicas with more than K items, the most loaded first (ties: the lower index).
  std::set<std::pair<double, int>> donors;
  for (int s = 0; s < dp_; ++s) {
    if (counts[static_cast<size_t>(s)] > k_) donors.emplace(-load_[static_cast<size_t>(s)], s);
  }
  for (int r = 0; r < dp_; ++r) {
    while (counts[static_cast<size_t>(r)] < k_) {
      if (donors.empty()) {
        by_cost_.clear();
        return false;
      }
      const int donor = donors.begin()->second;
      donors.erase(donors.begin());
      move(cheapest_movable(donor, -1), first_empty(r));
      --counts[static_cast<size_t>(donor)];
      ++counts[static_cast<size_t>(r)];
      if (counts[static_cast<size_t>(donor)] > k_) {
        donors.emplace(-load_[static_cast<size_t>(donor)], donor);
      }
    }
  }
  for (int r = 0; r < dp_; ++r) {
    for (int64_t empty = first_empty(r); empty >= 0; empty = first_empty(r)) {
      int64_t source = -1;
      for (int64_t b = bin_index(r, 0), end = b + k_; b < end; ++b) {
        const int64_t count = bin_count_[static_cast<size_t>(b)];
        if (count >= 2 && (source < 0 || count > bin_count_[static_cast<size_t>(source)]))
          source = b;
      }
      if (source < 0) {
        by_cost_.clear();
        return false;
      }
      move(cheapest_movable(r, source), empty);
    }
  }
  by_cost_.clear();
  return true;
}

BalancedAssignment::Transfer BalancedAssignment::find_transfer(int heavy, int light, double gap,
                                                               int64_t& scanned) const {
  Transfer best;
  const double close_enough = gap * kCloseEnough;
  const double half = gap / 2;
  const double min_delta = gap * 1e-9;
  auto consider = [&](double delta, int64_t give, int64_t take, int64_t to_bin) {
    if (delta <= min_delta || delta >= gap) return;
    const double score = std::abs(delta - half);
    if (best.score < 0 || score < best.score) best = Transfer{score, give, take, to_bin};
  };

  // The light replica's pack with the most room, for moves.
  const int64_t roomiest = rooms_.roomiest(light);
  const int64_t light_room = rooms_.max_room(light);
  const auto& heavy_items = by_cost_[static_cast<size_t>(heavy)];
  const auto& light_items = by_cost_[static_cast<size_t>(light)];

  scanned = 0;
  for (int64_t x : heavy_items) {
    if (best.score >= 0 && best.score <= close_enough) break;
    ++scanned;
    const auto xi = static_cast<size_t>(x);
    const int64_t x_bin = bin_of_[xi];
    const int64_t x_len = items_.lengths[xi];
    const double x_cost = items_.costs[xi];
    if (bin_count_[static_cast<size_t>(x_bin)] >= 2 && x_len <= light_room) {
      consider(x_cost, x, -1, roomiest);
    }
    // Swap partners: costs near x_cost - gap/2, scanning outward while they could still win.
    const double want = x_cost - half;
    const auto mid = std::lower_bound(
        light_items.begin(), light_items.end(), want,
        [&](int64_t y, double value) { return items_.costs[static_cast<size_t>(y)] < value; });
    const int64_t x_room = rooms_.room(x_bin) + x_len;
    auto fits = [&](int64_t y) {
      const auto yi = static_cast<size_t>(y);
      const int64_t y_len = items_.lengths[yi];
      return y_len <= x_room && x_len <= rooms_.room(bin_of_[yi]) + y_len;
    };
    // At most kProbesPerSide partners that do not fit, so a crowded light replica costs
    // O(log m) per heavy item, not O(m).
    auto scan = [&](auto it, auto end, auto step) {
      for (int probes = 0; it != end && probes < kProbesPerSide; step(it), ++probes) {
        const double delta = x_cost - items_.costs[static_cast<size_t>(*it)];
        if (best.score >= 0 && std::abs(delta - half) >= best.score) return;
        if (fits(*it)) {
          consider(delta, x, *it, bin_of_[static_cast<size_t>(*it)]);
          return;
        }
      }
    };
    scan(mid, light_items.end(), [](auto& it) { ++it; });
    scan(std::make_reverse_iterator(mid), light_items.rend(), [](auto& it) { ++it; });
  }
  return best;
}

void BalancedAssignment::apply(const Transfer& t) {
  const int64_t from_bin = bin_of_[static_cast<size_t>(t.give)];
  take_out(t.give);
  if (t.take >= 0) move(t.take, from_bin);
  put(t.give, t.to_bin);
}

void BalancedAssignment::refine(double target, const RefineBudget& budget) {
  // Already there (the common case at a million items): no per-replica lists to build.
  if (*std::max_element(load_.begin(), load_.end()) <= target) return;
  index_by_cost();
  // Replicas by (load, index), kept up to date as transfers change two loads: the heaviest is the
  // lowest index among the largest loads, lighter ones come in increasing load (ties by index).
  std::set<std::pair<double, int>> by_load;
  for (int r = 0; r < dp_; ++r) by_load.emplace(load_[static_cast<size_t>(r)], r);
  int64_t work_left = budget.work;
  for (int64_t step = 0; step < budget.max_transfers && work_left > 0; ++step) {
    const double top = by_load.rbegin()->first;
    if (top <= target) break;
    const int heavy = by_load.lower_bound({top, -1})->second;
    bool improved = false;
    const auto heavy_items = static_cast<int64_t>(by_cost_[static_cast<size_t>(heavy)].size());
    for (auto it = by_load.begin(); it != by_load.end() && work_left > 0; ++it) {
      const int light = it->second;
      const double gap = top - it->first;
      if (light == heavy || gap <= top * kRelativeEpsilon) break;
      // Each heavy item scanned costs a binary search and a bounded scan of the light replica's
      // items.
      int64_t scanned = 0;
      const Transfer t = find_transfer(heavy, light, gap, scanned);
      work_left -= scanned * (2 * kProbesPerSide + 1) + k_;
      if (t.score >= 0) {
        const int other = t.take >= 0 ? replica_of_bin(bin_of_[static_cast<size_t>(t.take)])
                                      : replica_of_bin(t.to_bin);
        // Sorted-list inserts and erases move the tails of both replicas' lists.
        work_left -=
            heavy_items + static_cast<int64_t>(by_cost_[static_cast<size_t>(other)].size());
        by_load.erase({load_[static_cast<size_t>(heavy)], heavy});
        by_load.erase({load_[static_cast<size_t>(other)], other});
        apply(t);
        by_load.emplace(load_[static_cast<size_t>(heavy)], heavy);
        by_load.emplace(load_[static_cast<size_t>(other)], other);
        improved = true;
        break;
      }
    }
    if (!improved) break;
  }
  by_cost_.clear();
}

double BalancedAssignment::step_cost(int pp) const {
  double worst = 0;
  const double bubble = pp > 1 ? static_cast<double>(pp - 1) / pp : 0.0;
  for (int r = 0; r < dp_; ++r) {
    const auto first = bin_cost_.begin() + bin_index(r, 0);
    const double largest = *std::max_element(first, first + k_);
    worst = std::max(worst, load_[static_cast<size_t>(r)] + bubble * largest);
  }
  return worst;
}

PackLists BalancedAssignment::packs(std::span<const int64_t> original) const {
  // Slot of each bin in its replica: micro-batches by decreasing cost, ties by bin index.
  std::vector<int64_t> pack_of_bin(static_cast<size_t>(dp_ * k_));
  // (cost, bin) pairs sorted directly: no indirect loads, and no buffer per replica as a stable
  // sort would allocate (bins are distinct, so ties by bin give the stable order).
  std::vector<std::pair<double, int64_t>> bins(static_cast<size_t>(k_));
  for (int r = 0; r < dp_; ++r) {
    for (int64_t slot = 0; slot < k_; ++slot) {
      const int64_t bin = bin_index(r, slot);
      bins[static_cast<size_t>(slot)] = {bin_cost_[static_cast<size_t>(bin)], bin};
    }
    std::sort(bins.begin(), bins.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    for (int64_t slot = 0; slot < k_; ++slot) {
      pack_of_bin[static_cast<size_t>(bins[static_cast<size_t>(slot)].second)] = slot * dp_ + r;
    }
  }
  PackLists out;
  out.offsets.assign(static_cast<size_t>(dp_ * k_) + 1, 0);
  for (int64_t bin : bin_of_)
    ++out.offsets[static_cast<size_t>(pack_of_bin[static_cast<size_t>(bin)]) + 1];
  std::partial_sum(out.offsets.begin(), out.offsets.end(), out.offsets.begin());
  // One pass in rank order (sequential reads; a pass in original order would first need the pack
  // of every original index, one more scatter over n entries).
  std::vector<int64_t> cursor(out.offsets.begin(), out.offsets.end() - 1);
  out.items.resize(bin_of_.size());
  for (size_t rank = 0; rank < bin_of_.size(); ++rank) {
    const auto pack = static_cast<size_t>(pack_of_bin[static_cast<size_t>(bin_of_[rank])]);
    out.items[static_cast<size_t>(cursor[pack]++)] = original[rank];
  }
  return out;
}

}  // namespace thdpack::detail
