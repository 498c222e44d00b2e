#include "schedule/balanced_assignment.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace thdpack::detail {
namespace {

// Relative size below which a load difference is treated as noise (keeps refinement finite).
constexpr double kRelativeEpsilon = 1e-12;

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
      room_(static_cast<size_t>(dp * k), capacity),
      bin_cost_(static_cast<size_t>(dp * k), 0.0),
      bin_count_(static_cast<size_t>(dp * k), 0),
      load_(static_cast<size_t>(dp), 0.0),
      bin_of_(static_cast<size_t>(items.size()), -1) {}

int64_t BalancedAssignment::choose_bin(int replica, int64_t length, Fit fit) const {
  int64_t chosen = -1;
  int64_t chosen_room = 0;
  for (int64_t b = bin_index(replica, 0), end = b + k_; b < end; ++b) {
    const int64_t room = room_[static_cast<size_t>(b)];
    if (room < length) continue;
    if (chosen < 0 || (fit == Fit::kWorst ? room > chosen_room : room < chosen_room)) {
      chosen = b;
      chosen_room = room;
    }
  }
  return chosen;
}

void BalancedAssignment::put(int64_t item, int64_t bin) {
  const auto i = static_cast<size_t>(item);
  const auto b = static_cast<size_t>(bin);
  room_[b] -= items_.lengths[i];
  bin_cost_[b] += items_.costs[i];
  ++bin_count_[b];
  load_[static_cast<size_t>(replica_of_bin(bin))] += items_.costs[i];
  bin_of_[i] = bin;
  if (!by_cost_.empty()) {
    auto& list = by_cost_[static_cast<size_t>(replica_of_bin(bin))];
    list.insert(std::lower_bound(list.begin(), list.end(), item, cheaper_), item);
  }
}

void BalancedAssignment::take_out(int64_t item) {
  const auto i = static_cast<size_t>(item);
  const int64_t bin = bin_of_[i];
  const auto b = static_cast<size_t>(bin);
  room_[b] += items_.lengths[i];
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

bool BalancedAssignment::place_longest_first(std::span<const int64_t> order, Fit fit) {
  ReplicaTournament least_loaded(load_);
  std::vector<int> set_aside;  // replicas the current item does not fit
  for (int64_t item : order) {
    const int64_t length = items_.lengths[static_cast<size_t>(item)];
    bool placed = false;
    while (!least_loaded.exhausted()) {
      const int r = least_loaded.top();
      const int64_t bin = choose_bin(r, length, fit);
      if (bin >= 0) {
        put(item, bin);
        least_loaded.set(r, load_[static_cast<size_t>(r)]);
        placed = true;
        break;
      }
      least_loaded.set_aside(r);
      set_aside.push_back(r);
    }
    // Items come longest first, so a replica that could not take this one may take shorter ones.
    for (int r : set_aside) least_loaded.set(r, load_[static_cast<size_t>(r)]);
    set_aside.clear();
    if (!placed) return false;
  }
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
  std::vector<int64_t> used(static_cast<size_t>(dp_), 0);
  for (int64_t p : order) {
    int best = -1;
    for (int r = 0; r < dp_; ++r) {
      if (used[static_cast<size_t>(r)] == k_) continue;
      if (best < 0 || load_[static_cast<size_t>(r)] < load_[static_cast<size_t>(best)]) best = r;
    }
    const int64_t bin = bin_index(best, used[static_cast<size_t>(best)]++);
    for (int64_t item : packs.bin(p)) put(item, bin);
  }
  return true;
}

bool BalancedAssignment::fill_empty_packs() {
  if (std::find(bin_count_.begin(), bin_count_.end(), 0) == bin_count_.end()) return true;
  if (items_.size() < dp_ * k_) return false;

  std::vector<int64_t> counts(static_cast<size_t>(dp_), 0);  // items per replica
  for (int64_t bin = 0; bin < dp_ * k_; ++bin)
    counts[static_cast<size_t>(replica_of_bin(bin))] += bin_count_[static_cast<size_t>(bin)];
  // The cheapest item of `replica` (optionally of one bin) that shares its pack with another.
  auto cheapest_movable = [&](int replica, int64_t only_bin) {
    int64_t best = -1;
    for (int64_t item = 0; item < items_.size(); ++item) {
      const int64_t bin = bin_of_[static_cast<size_t>(item)];
      if (replica_of_bin(bin) != replica || bin_count_[static_cast<size_t>(bin)] < 2) continue;
      if (only_bin >= 0 && bin != only_bin) continue;
      if (best < 0 || cheaper_(item, best)) best = item;
    }
    return best;
  };
  auto first_empty = [&](int replica) {
    for (int64_t b = bin_index(replica, 0), end = b + k_; b < end; ++b) {
      if (bin_count_[static_cast<size_t>(b)] == 0) return b;
    }
    return int64_t{-1};
  };

  for (int r = 0; r < dp_; ++r) {
    while (counts[static_cast<size_t>(r)] < k_) {
      int donor = -1;
      for (int s = 0; s < dp_; ++s) {
        if (counts[static_cast<size_t>(s)] <= k_) continue;
        if (donor < 0 || load_[static_cast<size_t>(s)] > load_[static_cast<size_t>(donor)])
          donor = s;
      }
      if (donor < 0) return false;
      move(cheapest_movable(donor, -1), first_empty(r));
      --counts[static_cast<size_t>(donor)];
      ++counts[static_cast<size_t>(r)];
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
      if (source < 0) return false;
      move(cheapest_movable(r, source), empty);
    }
  }
  return true;
}

BalancedAssignment::Transfer BalancedAssignment::find_transfer(int heavy, int light,
                                                               double gap) const {
  Transfer best;
  const double half = gap / 2;
  const double min_delta = gap * 1e-9;
  auto consider = [&](double delta, int64_t give, int64_t take, int64_t to_bin) {
    if (delta <= min_delta || delta >= gap) return;
    const double score = std::abs(delta - half);
    if (best.score < 0 || score < best.score) best = Transfer{score, give, take, to_bin};
  };

  // The light replica's pack with the most room, for moves.
  int64_t roomiest = bin_index(light, 0);
  for (int64_t b = roomiest + 1, end = roomiest + k_; b < end; ++b) {
    if (room_[static_cast<size_t>(b)] > room_[static_cast<size_t>(roomiest)]) roomiest = b;
  }
  const int64_t light_room = room_[static_cast<size_t>(roomiest)];
  const auto& heavy_items = by_cost_[static_cast<size_t>(heavy)];
  const auto& light_items = by_cost_[static_cast<size_t>(light)];

  for (int64_t x : heavy_items) {
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
    const int64_t x_room = room_[static_cast<size_t>(x_bin)] + x_len;
    auto fits = [&](int64_t y) {
      const auto yi = static_cast<size_t>(y);
      const int64_t y_len = items_.lengths[yi];
      return y_len <= x_room && x_len <= room_[static_cast<size_t>(bin_of_[yi])] + y_len;
    };
    auto scan = [&](auto it, auto end, auto step) {
      for (; it != end; step(it)) {
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

void BalancedAssignment::refine(std::span<const int64_t> order, double target, int64_t max_steps) {
  // Walking the global order backwards fills each replica's list already sorted by Cheaper.
  by_cost_.assign(static_cast<size_t>(dp_), {});
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    by_cost_[static_cast<size_t>(replica_of_bin(bin_of_[static_cast<size_t>(*it)]))].push_back(*it);
  }
  std::vector<int> ascending(static_cast<size_t>(dp_));
  for (int64_t step = 0; step < max_steps; ++step) {
    const int heavy =
        static_cast<int>(std::max_element(load_.begin(), load_.end()) - load_.begin());
    const double top = load_[static_cast<size_t>(heavy)];
    if (top <= target) break;
    std::iota(ascending.begin(), ascending.end(), 0);
    std::sort(ascending.begin(), ascending.end(), [&](int a, int b) {
      return load_[static_cast<size_t>(a)] < load_[static_cast<size_t>(b)] ||
             (load_[static_cast<size_t>(a)] == load_[static_cast<size_t>(b)] && a < b);
    });
    bool improved = false;
    for (int light : ascending) {
      const double gap = top - load_[static_cast<size_t>(light)];
      if (light == heavy || gap <= top * kRelativeEpsilon) break;
      const Transfer t = find_transfer(heavy, light, gap);
      if (t.score >= 0) {
        apply(t);
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

PackLists BalancedAssignment::packs() const {
  // Slot of each bin in its replica: micro-batches by decreasing cost, ties by bin index.
  std::vector<int64_t> pack_of_bin(static_cast<size_t>(dp_ * k_));
  std::vector<int64_t> bins(static_cast<size_t>(k_));
  for (int r = 0; r < dp_; ++r) {
    std::iota(bins.begin(), bins.end(), bin_index(r, 0));
    std::stable_sort(bins.begin(), bins.end(), [&](int64_t a, int64_t b) {
      return bin_cost_[static_cast<size_t>(a)] > bin_cost_[static_cast<size_t>(b)];
    });
    for (int64_t slot = 0; slot < k_; ++slot) {
      pack_of_bin[static_cast<size_t>(bins[static_cast<size_t>(slot)])] = slot * dp_ + r;
    }
  }
  PackLists out;
  out.offsets.assign(static_cast<size_t>(dp_ * k_) + 1, 0);
  for (int64_t bin : bin_of_)
    ++out.offsets[static_cast<size_t>(pack_of_bin[static_cast<size_t>(bin)]) + 1];
  std::partial_sum(out.offsets.begin(), out.offsets.end(), out.offsets.begin());
  std::vector<int64_t> cursor(out.offsets.begin(), out.offsets.end() - 1);
  out.items.resize(bin_of_.size());
  for (size_t item = 0; item < bin_of_.size(); ++item) {
    const auto pack = static_cast<size_t>(pack_of_bin[static_cast<size_t>(bin_of_[item])]);
    out.items[static_cast<size_t>(cursor[pack]++)] = static_cast<int64_t>(item);
  }
  return out;
}

}  // namespace thdpack::detail
