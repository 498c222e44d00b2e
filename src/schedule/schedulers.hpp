#pragma once
// The schedulers behind the registry (scheduler.hpp describes the contract they share).

#include <span>
#include <string>
#include <utility>

#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::detail {

/// Workload-aware: the smallest modeled step time under the cap (balanced_scheduler.cpp).
class BalancedScheduler final : public Scheduler {
 public:
  std::string name() const override { return "balanced"; }
  CpLayout layout() const override { return CpLayout::kFixed; }
  std::string description() const override;
  Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const override;
};

/// Megatron-LM's DpBalancedScheduler, exactly (dp_balanced_scheduler.cpp).
class DpBalancedScheduler final : public Scheduler {
 public:
  std::string name() const override { return "dp_balanced"; }
  CpLayout layout() const override { return CpLayout::kFixed; }
  std::string description() const override;
  Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const override;
};

/// No data movement between DP ranks (local_scheduler.cpp).
class LocalScheduler final : public Scheduler {
 public:
  std::string name() const override { return "local"; }
  CpLayout layout() const override { return CpLayout::kFixed; }
  std::string description() const override;
  Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const override;
};

/// A dynamic-CP scheduler (dynamic_cp.hpp) behind the common interface: checks that the input has
/// no group ids and the options no sequence cap (neither applies to dynamic CP), then plans with
/// options.
class DynamicCpScheduler final : public Scheduler {
 public:
  using Function = Plan (*)(std::span<const int64_t> ids, std::span<const int64_t> padded_lengths,
                            const ScheduleOptions& options);
  DynamicCpScheduler(std::string name, std::string description, Function function)
      : name_(std::move(name)), description_(std::move(description)), function_(function) {}
  std::string name() const override { return name_; }
  CpLayout layout() const override { return CpLayout::kDynamic; }
  std::string description() const override { return description_; }
  Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const override;

 private:
  std::string name_;
  std::string description_;
  Function function_;
};

}  // namespace thdpack::detail
