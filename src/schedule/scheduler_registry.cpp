#include "core/name_lookup.hpp"
#include "schedule/schedulers.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
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

std::vector<std::string> dynamic_cp_scheduler_names() {
  return {"default_dynamic_cp", "balanced_dynamic_cp"};
}

DynamicCpPlan schedule_dynamic_cp(const std::string& name, std::span<const int64_t> ids,
                                  std::span<const int64_t> padded_lengths,
                                  const DynamicCpOptions& options) {
  if (name == "default_dynamic_cp") return schedule_default_dynamic_cp(ids, padded_lengths, options);
  if (name == "balanced_dynamic_cp") {
    return schedule_balanced_dynamic_cp(ids, padded_lengths, options);
  }
  detail::throw_unknown_name("dynamic CP scheduler", name, dynamic_cp_scheduler_names());
}

}  // namespace thdpack
