// Modeled step time and lower bound of a dynamic-CP plan (definitions in dynamic_cp.hpp).

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "schedule/dynamic_cp_sizes.hpp"
#include "schedule/dynamic_cp_step.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack {

namespace detail {

namespace {

/// cost.time(length, size) remembered in a direct-mapped table per group size: padded lengths
/// take a few hundred values, and a plan of a million samples would otherwise evaluate the cost
/// model a million times (most of the time a scheduler spends comparing two plans).
class TimeCache {
 public:
  explicit TimeCache(const CpCostModel& cost) : cost_(cost) {}
  double operator()(int64_t length, int size) {
    if (size != size_) {
      size_ = size;
      entries_ = &tables_[size];
      if (entries_->empty()) entries_->assign(kEntries, Entry{-1, 0.0});
    }
    Entry& e = (*entries_)[static_cast<size_t>(static_cast<uint64_t>(length) * kGolden >> kShift)];
    if (e.length != length) e = Entry{length, cost_.time(length, size)};
    return e.time;
  }

 private:
  struct Entry {
    int64_t length;
    double time;
  };
  static constexpr size_t kEntries = 4096;
  static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
  static constexpr int kShift = 64 - 12;
  const CpCostModel& cost_;
  std::map<int, std::vector<Entry>> tables_;
  int size_ = 0;
  std::vector<Entry>* entries_ = nullptr;
};

}  // namespace

double modeled_step(const DynamicCpPlan& plan, const LengthById& length_of,
                    const CpCostModel& cost) {
  TimeCache time(cost);
  double step = 0;
  for (const auto& mb : plan.microbatches) {
    double slowest = 0;
    for (const auto& g : mb.groups) {
      double t = 0;
      for (const int64_t id : g.ids) {
        const int64_t length = length_of(id);
        if (length < 0) {
          throw InvalidArgument("dynamic CP plan: sample " + std::to_string(id) +
                                " is not in the input");
        }
        t += time(length, g.size);
      }
      slowest = std::max(slowest, t);
    }
    step += slowest;
  }
  return step;
}

}  // namespace detail

DynamicCpStats evaluate_dynamic_cp_plan(const DynamicCpPlan& plan, std::span<const int64_t> ids,
                                        std::span<const int64_t> padded_lengths,
                                        const DynamicCpOptions& options, const CpCostModel& cost) {
  double area = 0;
  double longest = 0;
  std::vector<int> sizes;
  for (size_t i = 0; i < ids.size(); ++i) {
    detail::candidate_cp_sizes(padded_lengths[i], options, sizes);
    if (sizes.empty()) {
      throw InvalidArgument("sample " + std::to_string(ids[i]) + " needs more than dp*cp ranks");
    }
    double best_time = cost.time(padded_lengths[i], sizes.front());
    for (const int c : sizes) best_time = std::min(best_time, cost.time(padded_lengths[i], c));
    const int c = detail::least_area_cp_size(padded_lengths[i], sizes, cost);
    area += cost.area(padded_lengths[i], c);
    longest = std::max(longest, best_time);
  }
  DynamicCpStats stats;
  stats.lower_bound = std::max(area / options.ranks(), longest);
  stats.microbatches = plan.num_microbatches();
  stats.step = detail::modeled_step(plan, detail::LengthById(ids, padded_lengths), cost);
  for (const auto& mb : plan.microbatches) stats.groups += static_cast<int64_t>(mb.groups.size());
  return stats;
}

double fixed_cp_modeled_step(const Plan& plan, std::span<const int64_t> ids,
                             std::span<const int64_t> padded_lengths, int cp,
                             const CpCostModel& cost) {
  const detail::LengthById length_of(ids, padded_lengths);
  double slowest = 0;
  for (int r = 0; r < plan.dp(); ++r) {
    double t = 0;
    for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
      for (const int64_t id : plan.pack(k, r)) {
        const int64_t length = length_of(id);
        if (length < 0) {
          throw InvalidArgument("plan: sample " + std::to_string(id) + " is not in the input");
        }
        t += cost.time(length, cp);
      }
    }
    slowest = std::max(slowest, t);
  }
  return slowest;
}

}  // namespace thdpack
