#pragma once
#include "thdpack/scheduler.hpp"

namespace thdpack::detail {

class DpBalancedScheduler final : public Scheduler {
 public:
  std::string name() const override { return "dp_balanced"; }
  std::string description() const override;
  Plan schedule(const ScheduleInput& input, const ScheduleOptions& options) const override;
};

}  // namespace thdpack::detail
