#include "schedule/pack_splitting.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "thdpack/core/errors.hpp"

namespace thdpack::detail {

bool split_packs_to(std::vector<std::vector<int64_t>>& packs, int64_t target,
                    const std::function<int64_t(int64_t)>& length_of) {
  std::vector<int64_t> tokens(packs.size(), 0);
  for (size_t p = 0; p < packs.size(); ++p) {
    for (int64_t entry : packs[p]) tokens[p] += length_of(entry);
  }
  while (static_cast<int64_t>(packs.size()) < target) {
    size_t best = packs.size();
    for (size_t p = 0; p < packs.size(); ++p) {
      if (packs[p].size() < 2) continue;
      if (best == packs.size() || packs[p].size() > packs[best].size() ||
          (packs[p].size() == packs[best].size() && tokens[p] > tokens[best])) {
        best = p;
      }
    }
    if (best == packs.size()) return false;
    const int64_t entry = packs[best].back();
    packs[best].pop_back();
    tokens[best] -= length_of(entry);
    packs.push_back({entry});
    tokens.push_back(length_of(entry));
  }
  return true;
}

namespace {

int64_t tokens_of(const std::vector<int64_t>& pack,
                  const std::unordered_map<int64_t, int64_t>& length) {
  int64_t sum = 0;
  for (int64_t id : pack) sum += length.at(id);
  return sum;
}

// Moves packs from replicas holding more than k to those holding fewer, lightest packs first, each
// to the lightest replica short of k.
void spread_packs(std::vector<std::vector<std::vector<int64_t>>>& replicas, int64_t k,
                  const std::unordered_map<int64_t, int64_t>& length) {
  std::vector<int64_t> load(replicas.size(), 0);
  for (size_t r = 0; r < replicas.size(); ++r) {
    for (const auto& pack : replicas[r]) load[r] += tokens_of(pack, length);
  }
  for (size_t r = 0; r < replicas.size(); ++r) {
    auto& from = replicas[r];
    if (static_cast<int64_t>(from.size()) <= k) continue;
    std::stable_sort(from.begin(), from.end(), [&](const auto& a, const auto& b) {
      return tokens_of(a, length) > tokens_of(b, length);
    });
    while (static_cast<int64_t>(from.size()) > k) {
      size_t to = replicas.size();
      for (size_t q = 0; q < replicas.size(); ++q) {
        if (static_cast<int64_t>(replicas[q].size()) < k &&
            (to == replicas.size() || load[q] < load[to])) {
          to = q;
        }
      }
      if (to == replicas.size()) return;
      const int64_t tokens = tokens_of(from.back(), length);
      load[r] -= tokens;
      load[to] += tokens;
      replicas[to].push_back(std::move(from.back()));
      from.pop_back();
    }
  }
}

}  // namespace

Plan cap_sequences_per_pack(Plan plan, const ScheduleInput& input, const ScheduleOptions& options,
                            PackMoves moves) {
  const auto cap = static_cast<size_t>(options.max_sequences_per_pack);
  if (cap == 0) return plan;
  bool within = true;
  for (int64_t p = 0; p < plan.num_packs() && within; ++p) within = plan.pack_at(p).size() <= cap;
  if (within) return plan;

  std::unordered_map<int64_t, int64_t> length;
  length.reserve(input.ids.size() * 2);
  for (size_t i = 0; i < input.ids.size(); ++i)
    length.emplace(input.ids[i], input.padded_lengths[i]);
  const int dp = plan.dp();
  std::vector<std::vector<std::vector<int64_t>>> replicas(static_cast<size_t>(dp));
  int64_t k = 0, total = 0;
  for (int r = 0; r < dp; ++r) {
    auto& packs = replicas[static_cast<size_t>(r)];
    for (int64_t step = 0; step < plan.num_microbatches(); ++step) {
      const auto ids = plan.pack(step, r);
      for (size_t from = 0; from < ids.size(); from += cap) {
        const size_t to = std::min(ids.size(), from + cap);
        packs.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(from),
                           ids.begin() + static_cast<std::ptrdiff_t>(to));
      }
    }
    k = std::max(k, static_cast<int64_t>(packs.size()));
    total += static_cast<int64_t>(packs.size());
  }
  if (moves == PackMoves::kAllowed) {
    k = (total + dp - 1) / dp;
    spread_packs(replicas, k, length);
  }
  const int64_t multiple = options.microbatch_multiple;
  k = (k + multiple - 1) / multiple * multiple;
  const auto length_of = [&length](int64_t id) { return length.at(id); };
  for (int r = 0; r < dp; ++r) {
    if (!split_packs_to(replicas[static_cast<size_t>(r)], k, length_of)) {
      fail("with at most ", cap, " sequences per pack (thd_max_packed_sequences) DP replica ", r,
           " has too few samples for the ", k,
           " micro-batches another replica needs; use a larger global batch or a larger cap");
    }
  }
  std::vector<std::vector<int64_t>> packs;
  packs.reserve(static_cast<size_t>(k * dp));
  for (int64_t step = 0; step < k; ++step) {
    for (int r = 0; r < dp; ++r) {
      packs.push_back(std::move(replicas[static_cast<size_t>(r)][static_cast<size_t>(step)]));
    }
  }
  return Plan(dp, plan.cp(), packs);
}

std::vector<std::vector<int64_t>> split_item_packs_to(
    std::vector<std::vector<std::vector<int64_t>>> packs, int64_t target,
    std::span<const double> cost, std::span<const char> in_run) {
  using Item = std::vector<int64_t>;
  auto cost_of = [&cost](const Item& item) {
    double sum = 0;
    for (int64_t p : item) sum += cost[static_cast<size_t>(p)];
    return sum;
  };
  std::vector<double> pack_cost;
  for (const auto& pack : packs) {
    double sum = 0;
    for (const Item& item : pack) sum += cost_of(item);
    pack_cost.push_back(sum);
  }
  while (static_cast<int64_t>(packs.size()) < target) {
    size_t at = packs.size();
    for (size_t i = 0; i < packs.size(); ++i) {
      if (packs[i].size() > 1 && (at == packs.size() || pack_cost[i] > pack_cost[at])) at = i;
    }
    if (at == packs.size()) break;
    Item moved = std::move(packs[at].back());
    packs[at].pop_back();
    const double moved_cost = cost_of(moved);
    pack_cost[at] -= moved_cost;
    const size_t to = in_run[static_cast<size_t>(moved.front())] != 0 ? at + 1 : packs.size();
    packs.insert(packs.begin() + static_cast<std::ptrdiff_t>(to),
                 std::vector<Item>{std::move(moved)});
    pack_cost.insert(pack_cost.begin() + static_cast<std::ptrdiff_t>(to), moved_cost);
  }
  std::vector<std::vector<int64_t>> out;
  for (const auto& pack : packs) {
    std::vector<int64_t> positions;
    for (const Item& item : pack) positions.insert(positions.end(), item.begin(), item.end());
    std::sort(positions.begin(), positions.end());
    out.push_back(std::move(positions));
  }
  return out;
}

}  // namespace thdpack::detail
