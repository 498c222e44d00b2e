#include "core/name_lookup.hpp"
#include "schedule/schedulers.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

std::vector<std::string> scheduler_names() {
  return {"balanced", "dp_balanced", "local"};
}

std::unique_ptr<Scheduler> make_scheduler(const std::string& name) {
  if (name == "balanced") return std::make_unique<detail::BalancedScheduler>();
  if (name == "dp_balanced") return std::make_unique<detail::DpBalancedScheduler>();
  if (name == "local") return std::make_unique<detail::LocalScheduler>();
  detail::throw_unknown_name("scheduler", name, scheduler_names());
}

}  // namespace thdpack
