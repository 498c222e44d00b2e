#pragma once
#include "thdpack/scheduler.hpp"

namespace thdpack::detail {

class BalancedScheduler final : public Scheduler {
 public:
  std::string name() const override { return "balanced"; }
  std::string description() const override;
  Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const override;
};

}  // namespace thdpack::detail
