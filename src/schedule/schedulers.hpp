#pragma once
// The schedulers behind the registry (scheduler.hpp describes the contract they share).

#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::detail {

/// Workload-aware: the smallest modeled step time under the cap (balanced_scheduler.cpp).
class BalancedScheduler final : public Scheduler {
 public:
  std::string name() const override { return "balanced"; }
  std::string description() const override;
  Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const override;
};

/// Megatron-LM's DpBalancedScheduler, exactly (dp_balanced_scheduler.cpp).
class DpBalancedScheduler final : public Scheduler {
 public:
  std::string name() const override { return "dp_balanced"; }
  std::string description() const override;
  Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const override;
};

/// No data movement between DP ranks (local_scheduler.cpp).
class LocalScheduler final : public Scheduler {
 public:
  std::string name() const override { return "local"; }
  std::string description() const override;
  Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const override;
};

}  // namespace thdpack::detail
