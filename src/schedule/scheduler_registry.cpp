// The one registry of schedulers, fixed and dynamic CP alike.

#include <algorithm>

#include "core/name_lookup.hpp"
#include "schedule/schedulers.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack {

std::vector<std::string> scheduler_names() {
  return {"balanced", "dp_balanced", "local", "default_dynamic_cp", "balanced_dynamic_cp"};
}

std::unique_ptr<Scheduler> make_scheduler(const std::string& name) {
  if (name == "balanced") return std::make_unique<detail::BalancedScheduler>();
  if (name == "dp_balanced") return std::make_unique<detail::DpBalancedScheduler>();
  if (name == "local") return std::make_unique<detail::LocalScheduler>();
  if (name == "default_dynamic_cp") {
    return std::make_unique<detail::DynamicCpScheduler>(
        name, "Megatron-LM's dynamic CP scheduler (dev, packing-aware), exactly",
        &schedule_default_dynamic_cp);
  }
  if (name == "balanced_dynamic_cp") {
    return std::make_unique<detail::DynamicCpScheduler>(
        name,
        "ours: CP size, group and micro-batch of every sample chosen together to minimise the "
        "modeled step under the CP cost model; never slower than default_dynamic_cp",
        &schedule_balanced_dynamic_cp);
  }
  detail::throw_unknown_name("scheduler", name, scheduler_names());
}

std::vector<std::string> scheduler_names(CpLayout layout) {
  std::vector<std::string> names = scheduler_names();
  std::erase_if(names, [layout](const std::string& n) { return scheduler_layout(n) != layout; });
  return names;
}

CpLayout scheduler_layout(const std::string& name) {
  return make_scheduler(name)->layout();
}

namespace detail {

Plan DynamicCpScheduler::schedule(const ScheduleInput& input,
                                  const ScheduleOptions& options) const {
  if (!input.group_ids.empty()) {
    fail("scheduler ", name_, " does not keep groups of samples together; give no group ids");
  }
  if (options.max_sequences_per_pack > 0) {
    fail("scheduler ", name_,
         " (dynamic CP) does not support "
         "max_sequences_per_pack");
  }
  return function_(input.ids, input.padded_lengths, options);
}

}  // namespace detail
}  // namespace thdpack
