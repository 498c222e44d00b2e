#include "balanced_assignment.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>

namespace thdpack::detail {
namespace {

// Relative size below which a load difference is treated as noise (keeps refinement finite).
constexpr double kRelativeEpsilon = 1e-12;

}  // namespace

BalancedAssignment::BalancedAssignment(const ScheduleItems& items, int dp, int64_t k,
                                       int64_t capacity)
    : items_(items),
      cheaper_{&items},
      dp_(dp),
      k_(k),
      capacity_(capacity),
      room_(static_cast<size_t>(dp * k), capacity),
      bin_cost_(static_cast<size_t>(dp * k), 0.0),
      bin_items_(static_cast<size_t>(dp * k)),
      load_(static_cast<size_t>(dp), 0.0),
      bin_of_(static_cast<size_t>(items.size()), -1) {}

int64_t BalancedAssignment::choose_bin(int replica, int64_t length, Fit fit) const {
  int64_t chosen = -1;
  for (int64_t k = 0; k < k_; ++k) {
    const int64_t b = bin_index(replica, k);
    const int64_t room = room_[static_cast<size_t>(b)];
    if (room < length) continue;
    if (chosen < 0) {
      chosen = b;
    } else if (fit == Fit::kWorst ? room > room_[static_cast<size_t>(chosen)]
                                  : room < room_[static_cast<size_t>(chosen)]) {
      chosen = b;
    }
  }
  return chosen;
}

void BalancedAssignment::put(int64_t item, int64_t bin) {
  const auto i = static_cast<size_t>(item);
  const auto b = static_cast<size_t>(bin);
  room_[b] -= items_.lengths[i];
  bin_cost_[b] += items_.costs[i];
  bin_items_[b].push_back(item);
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
  auto& list = bin_items_[b];
  list.erase(std::find(list.begin(), list.end(), item));
  load_[static_cast<size_t>(replica_of_bin(bin))] -= items_.costs[i];
  bin_of_[i] = -1;
  if (!by_cost_.empty()) {
    auto& sorted = by_cost_[static_cast<size_t>(replica_of_bin(bin))];
    sorted.erase(std::lower_bound(sorted.begin(), sorted.end(), item, cheaper_));
  }
}

bool BalancedAssignment::place_longest_first(std::span<const int64_t> order, Fit fit) {
  using Entry = std::pair<double, int>;  // (load, replica): least loaded, then lowest index
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (int r = 0; r < dp_; ++r) heap.push({0.0, r});
  std::vector<int> popped;
  for (int64_t item : order) {
    const int64_t length = items_.lengths[static_cast<size_t>(item)];
    popped.clear();
    int64_t bin = -1;
    while (!heap.empty() && bin < 0) {
      const int r = heap.top().second;
      heap.pop();
      popped.push_back(r);
      bin = choose_bin(r, length, fit);
    }
    if (bin >= 0) put(item, bin);
    for (int r : popped) heap.push({load_[static_cast<size_t>(r)], r});
    if (bin < 0) return false;
  }
  return true;
}

bool BalancedAssignment::place_packs(const Bins& packs) {
  if (packs.count() > dp_ * k_) return false;
  std::vector<double> cost(static_cast<size_t>(packs.count()), 0.0);
  for (int64_t p = 0; p < packs.count(); ++p) {
    for (int64_t item : packs.bin(p)) cost[static_cast<size_t>(p)] += items_.costs[static_cast<size_t>(item)];
  }
  std::vector<int64_t> order(static_cast<size_t>(packs.count()));
  for (size_t p = 0; p < order.size(); ++p) order[p] = static_cast<int64_t>(p);
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

int64_t BalancedAssignment::item_count(int replica) const {
  int64_t count = 0;
  for (int64_t k = 0; k < k_; ++k) count += static_cast<int64_t>(bin_items_[static_cast<size_t>(bin_index(replica, k))].size());
  return count;
}

bool BalancedAssignment::fill_empty_packs() {
  if (items_.size() < dp_ * k_) return false;
  std::vector<int64_t> counts(static_cast<size_t>(dp_));
  for (int r = 0; r < dp_; ++r) counts[static_cast<size_t>(r)] = item_count(r);

  // The cheapest item of `replica` that sits in a pack with at least two items.
  auto cheapest_movable = [&](int replica) {
    int64_t best = -1;
    for (int64_t k = 0; k < k_; ++k) {
      const auto& list = bin_items_[static_cast<size_t>(bin_index(replica, k))];
      if (list.size() < 2) continue;
      for (int64_t item : list) {
        if (best < 0 || items_.costs[static_cast<size_t>(item)] < items_.costs[static_cast<size_t>(best)] ||
            (items_.costs[static_cast<size_t>(item)] == items_.costs[static_cast<size_t>(best)] && item < best)) {
          best = item;
        }
      }
    }
    return best;
  };
  auto first_empty = [&](int replica) {
    for (int64_t k = 0; k < k_; ++k) {
      const int64_t b = bin_index(replica, k);
      if (bin_items_[static_cast<size_t>(b)].empty()) return b;
    }
    return int64_t{-1};
  };

  for (int r = 0; r < dp_; ++r) {
    while (counts[static_cast<size_t>(r)] < k_) {
      int donor = -1;
      for (int s = 0; s < dp_; ++s) {
        if (counts[static_cast<size_t>(s)] <= k_) continue;
        if (donor < 0 || load_[static_cast<size_t>(s)] > load_[static_cast<size_t>(donor)]) donor = s;
      }
      if (donor < 0) return false;
      const int64_t item = cheapest_movable(donor);
      take_out(item);
      put(item, first_empty(r));
      --counts[static_cast<size_t>(donor)];
      ++counts[static_cast<size_t>(r)];
    }
  }
  for (int r = 0; r < dp_; ++r) {
    for (int64_t empty = first_empty(r); empty >= 0; empty = first_empty(r)) {
      int64_t source = -1;
      for (int64_t k = 0; k < k_; ++k) {
        const int64_t b = bin_index(r, k);
        const auto size = bin_items_[static_cast<size_t>(b)].size();
        if (size >= 2 && (source < 0 || size > bin_items_[static_cast<size_t>(source)].size())) source = b;
      }
      if (source < 0) return false;
      const auto& list = bin_items_[static_cast<size_t>(source)];
      const int64_t item = *std::min_element(list.begin(), list.end(), cheaper_);
      take_out(item);
      put(item, empty);
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
  for (int64_t k = 1; k < k_; ++k) {
    const int64_t b = bin_index(light, k);
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
    if (bin_items_[static_cast<size_t>(x_bin)].size() >= 2 && x_len <= light_room) {
      consider(x_cost, x, -1, roomiest);
    }
    // Swap partners: costs near x_cost - gap/2, scanning outward while they could still win.
    const double want = x_cost - half;
    auto mid = std::lower_bound(light_items.begin(), light_items.end(), want,
                                [&](int64_t y, double value) { return items_.costs[static_cast<size_t>(y)] < value; });
    const int64_t x_room = room_[static_cast<size_t>(x_bin)] + x_len;
    auto try_swap = [&](int64_t y) {
      const auto yi = static_cast<size_t>(y);
      const int64_t y_bin = bin_of_[yi];
      const int64_t y_len = items_.lengths[yi];
      if (y_len <= x_room && x_len <= room_[static_cast<size_t>(y_bin)] + y_len) {
        consider(x_cost - items_.costs[yi], x, y, y_bin);
        return true;
      }
      return false;
    };
    for (auto it = mid; it != light_items.end(); ++it) {
      const double score = std::abs(x_cost - items_.costs[static_cast<size_t>(*it)] - half);
      if (best.score >= 0 && score >= best.score) break;
      if (try_swap(*it)) break;
    }
    for (auto it = mid; it != light_items.begin();) {
      --it;
      const double score = std::abs(x_cost - items_.costs[static_cast<size_t>(*it)] - half);
      if (best.score >= 0 && score >= best.score) break;
      if (try_swap(*it)) break;
    }
  }
  return best;
}

void BalancedAssignment::apply(const Transfer& t) {
  const int64_t from_bin = bin_of_[static_cast<size_t>(t.give)];
  take_out(t.give);
  if (t.take >= 0) {
    take_out(t.take);
    put(t.take, from_bin);
  }
  put(t.give, t.to_bin);
}

void BalancedAssignment::refine(double target, int64_t max_steps) {
  by_cost_.assign(static_cast<size_t>(dp_), {});
  for (int64_t item = 0; item < items_.size(); ++item) {
    by_cost_[static_cast<size_t>(replica_of_bin(bin_of_[static_cast<size_t>(item)]))].push_back(item);
  }
  for (auto& list : by_cost_) std::sort(list.begin(), list.end(), cheaper_);

  std::vector<int> ascending(static_cast<size_t>(dp_));
  for (int64_t step = 0; step < max_steps; ++step) {
    const int heavy = static_cast<int>(std::max_element(load_.begin(), load_.end()) - load_.begin());
    const double top = load_[static_cast<size_t>(heavy)];
    if (top <= target) break;
    for (int r = 0; r < dp_; ++r) ascending[static_cast<size_t>(r)] = r;
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
    double largest = 0;
    for (int64_t k = 0; k < k_; ++k) largest = std::max(largest, bin_cost_[static_cast<size_t>(bin_index(r, k))]);
    worst = std::max(worst, load_[static_cast<size_t>(r)] + bubble * largest);
  }
  return worst;
}

std::vector<std::vector<std::vector<int64_t>>> BalancedAssignment::bins() const {
  std::vector<std::vector<std::vector<int64_t>>> out(static_cast<size_t>(dp_));
  for (int r = 0; r < dp_; ++r) {
    std::vector<int64_t> order(static_cast<size_t>(k_));
    for (int64_t k = 0; k < k_; ++k) order[static_cast<size_t>(k)] = bin_index(r, k);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return bin_cost_[static_cast<size_t>(a)] > bin_cost_[static_cast<size_t>(b)];
    });
    for (int64_t b : order) out[static_cast<size_t>(r)].push_back(bin_items_[static_cast<size_t>(b)]);
  }
  return out;
}

}  // namespace thdpack::detail
