#include "thdpack/schedule/plan_stats.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <unordered_map>

#include "schedule/schedule_items.hpp"
#include "schedule/step_bounds.hpp"
#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/packing/bin_packing.hpp"

namespace thdpack {
namespace detail {

double tight_bound_of_sorted(std::span<const double> descending, int dp) {
  if (descending.empty()) return 0.0;
  // Prefix sums at two cursors that only move forward (no n-sized array): `ahead` is the sum of
  // the first `top` costs, `behind` of the first top - (j + 1), each added up in order.
  double total = 0.0;
  for (double c : descending) total += c;
  double bound = std::max(total / dp, descending[0]);
  // One replica receives j+1 of the j·dp+1 most costly samples: at least the j+1 cheapest of them.
  const auto n = static_cast<int64_t>(descending.size());
  double ahead = 0.0, behind = 0.0;
  size_t at_ahead = 0, at_behind = 0;
  for (int64_t j = 1; j * dp + 1 <= n; ++j) {
    const auto top = static_cast<size_t>(j * dp + 1);
    for (; at_ahead < top; ++at_ahead) ahead += descending[at_ahead];
    for (const size_t to = top - static_cast<size_t>(j + 1); at_behind < to; ++at_behind)
      behind += descending[at_behind];
    bound = std::max(bound, ahead - behind);
  }
  return bound;
}

}  // namespace detail

namespace {

std::unordered_map<int64_t, size_t> position_of(const ScheduleInput& input) {
  std::unordered_map<int64_t, size_t> where;
  where.reserve(input.ids.size() * 2);
  for (size_t i = 0; i < input.ids.size(); ++i) where.emplace(input.ids[i], i);
  return where;
}

}  // namespace

double step_cost_lower_bound(std::span<const double> costs, int dp) {
  if (costs.empty()) return 0.0;
  const double total = std::accumulate(costs.begin(), costs.end(), 0.0);
  return std::max(total / dp, *std::max_element(costs.begin(), costs.end()));
}

double step_cost_tight_bound(std::span<const double> costs, int dp) {
  std::vector<double> sorted(costs.begin(), costs.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  return detail::tight_bound_of_sorted(sorted, dp);
}

PlanStats evaluate_plan(const Plan& plan, const ScheduleInput& input,
                        std::span<const int64_t> real_lengths, const ScheduleOptions& options) {
  if (!real_lengths.empty() && real_lengths.size() != input.ids.size()) {
    throw InvalidArgument("evaluate_plan: real_lengths must be empty or one per sample");
  }
  const auto where = position_of(input);
  const int dp = plan.dp();
  const int64_t k_count = plan.num_microbatches();
  const int64_t capacity = options.capacity();
  const double bubble = options.pp > 1 ? static_cast<double>(options.pp - 1) / options.pp : 0.0;

  PlanStats s;
  s.num_samples = static_cast<int64_t>(input.ids.size());
  s.num_microbatches = k_count;
  s.num_groups = plan.num_groups();
  std::vector<double> replica_load(static_cast<size_t>(dp), 0.0);
  std::vector<double> replica_largest(static_cast<size_t>(dp), 0.0);
  for (int64_t k = 0; k < k_count; ++k) {
    for (int r = 0; r < dp; ++r) {
      int64_t tokens = 0;
      double cost = 0;
      for (int64_t id : plan.pack(k, r)) {
        const auto it = where.find(id);
        check(it != where.end(), "evaluate_plan: plan names sample ", id,
              " that is not in the input");
        const int64_t padded = input.padded_lengths[it->second];
        const int64_t real = real_lengths.empty() ? padded : real_lengths[it->second];
        tokens += padded;
        cost += options.cost.cost(padded);
        s.sums.add(real, padded);
      }
      if (tokens > capacity) ++s.cap_violations;
      replica_load[static_cast<size_t>(r)] += cost;
      replica_largest[static_cast<size_t>(r)] =
          std::max(replica_largest[static_cast<size_t>(r)], cost);
    }
  }
  s.real_tokens = static_cast<int64_t>(s.sums.s1_real);
  s.padded_tokens = static_cast<int64_t>(s.sums.s1_padded);
  const double allocated =
      static_cast<double>(dp) * static_cast<double>(k_count) * static_cast<double>(capacity);
  s.fill = allocated > 0 ? s.sums.s1_real / allocated : 0.0;
  s.padding_fraction =
      s.sums.s1_padded > 0 ? (s.sums.s1_padded - s.sums.s1_real) / s.sums.s1_padded : 0.0;

  const double cp = options.cp;
  s.replica_step_costs.resize(static_cast<size_t>(dp));
  double sum = 0;
  for (int r = 0; r < dp; ++r) {
    const double step =
        (replica_load[static_cast<size_t>(r)] + bubble * replica_largest[static_cast<size_t>(r)]) /
        cp;
    s.replica_step_costs[static_cast<size_t>(r)] = step;
    s.step_cost = std::max(s.step_cost, step);
    sum += step;
  }
  s.imbalance = sum > 0 ? s.step_cost / (sum / dp) : 1.0;

  std::vector<double> costs;
  costs.reserve(input.padded_lengths.size());
  for (int64_t len : input.padded_lengths) costs.push_back(options.cost.cost(len));
  s.step_lower_bound = step_cost_lower_bound(costs, dp) / cp;
  s.step_tight_bound = step_cost_tight_bound(costs, dp) / cp;
  s.step_ratio = s.step_lower_bound > 0 ? s.step_cost / s.step_lower_bound : 0.0;

  const int64_t multiple = options.microbatch_multiple;
  const int64_t total_padded = s.padded_tokens;
  // ceil(ceil(T / C) / dp) = ceil(T / (C x dp)), without forming C x dp (it may not fit).
  const int64_t packs_by_tokens = total_padded / capacity + (total_padded % capacity != 0);
  s.microbatch_token_bound =
      detail::round_up_to(packs_by_tokens / dp + (packs_by_tokens % dp != 0), multiple);
  if (!input.padded_lengths.empty() &&
      *std::max_element(input.padded_lengths.begin(), input.padded_lengths.end()) <= capacity) {
    const int64_t l2 = bins_lower_bound_l2(input.padded_lengths, capacity);
    s.microbatch_lower_bound = detail::round_up_to((l2 + dp - 1) / dp, multiple);
  } else {
    s.microbatch_lower_bound = s.microbatch_token_bound;
  }
  return s;
}

void validate_plan(const Plan& plan, const ScheduleInput& input, const ScheduleOptions& options) {
  auto broken = [](const std::string& what) {
    throw InternalError("plan contract broken: " + what);
  };
  if (plan.dp() != options.dp || plan.cp() != options.cp) {
    broken(message("plan is laid out for dp=", plan.dp(), " cp=", plan.cp()));
  }
  if (!plan.is_fixed_cp()) broken("plan is not fixed CP (dp groups of size cp per micro-batch)");
  if (plan.num_microbatches() % options.microbatch_multiple != 0) {
    broken(message(plan.num_microbatches(), " micro-batches are not a multiple of ",
                   options.microbatch_multiple));
  }
  const auto where = position_of(input);
  std::vector<int64_t> pack_of(input.ids.size(), -1);
  for (int64_t p = 0; p < plan.num_packs(); ++p) {
    const auto pack = plan.pack_at(p);
    if (pack.empty()) broken(message("pack ", p, " is empty"));
    if (options.max_sequences_per_pack > 0 &&
        static_cast<int64_t>(pack.size()) > options.max_sequences_per_pack) {
      broken(message("pack ", p, " holds ", pack.size(),
                     " samples, more than max_sequences_per_pack ",
                     options.max_sequences_per_pack));
    }
    int64_t tokens = 0;
    for (int64_t id : pack) {
      const auto it = where.find(id);
      if (it == where.end()) broken(message("unknown sample id ", id));
      if (pack_of[it->second] >= 0) broken(message("sample ", id, " appears twice"));
      pack_of[it->second] = p;
      const int64_t length = input.padded_lengths[it->second];
      if (sum_exceeds(tokens, length, options.capacity())) {
        broken(message("pack ", p, " holds more than the capacity ", options.capacity(),
                       " tokens (sample ", id, " of ", length, " tokens joins ", tokens, ")"));
      }
      tokens += length;
    }
  }
  for (size_t i = 0; i < input.ids.size(); ++i) {
    if (pack_of[i] < 0) broken(message("sample ", input.ids[i], " is missing"));
  }
  if (input.group_ids.empty()) return;
  // A group that fits stays in one pack; a larger one on one replica, in consecutive steps.
  struct Span {
    int64_t tokens = 0, first_pack = -1, low = 0, high = 0;
    std::set<int64_t> steps;
  };
  std::unordered_map<int64_t, Span> groups;
  for (size_t i = 0; i < input.ids.size(); ++i) {
    Span& g = groups[input.group_ids[i]];
    g.tokens += input.padded_lengths[i];
    const int64_t step = pack_of[i] / plan.dp();
    if (g.first_pack < 0) g.first_pack = pack_of[i], g.low = step, g.high = step;
    g.low = std::min(g.low, step);
    g.high = std::max(g.high, step);
    g.steps.insert(step);
  }
  for (size_t i = 0; i < input.ids.size(); ++i) {
    const Span& g = groups[input.group_ids[i]];
    const std::string name = "group " + std::to_string(input.group_ids[i]);
    if (g.tokens <= options.capacity()) {
      if (pack_of[i] != g.first_pack) broken(name + " is split across packs");
    } else if (pack_of[i] % plan.dp() != g.first_pack % plan.dp()) {
      broken(name + ", larger than one pack, is split across replicas");
    } else if (static_cast<int64_t>(g.steps.size()) != g.high - g.low + 1) {
      broken(name + ", larger than one pack, is not in consecutive micro-batches");
    }
  }
}

}  // namespace thdpack
