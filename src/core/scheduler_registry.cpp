#include "balanced_scheduler.hpp"
#include "dp_balanced_scheduler.hpp"
#include "local_scheduler.hpp"
#include "thdpack/errors.hpp"
#include "thdpack/scheduler.hpp"

namespace thdpack {

std::vector<std::string> scheduler_names() {
  return {"balanced", "dp_balanced", "local"};
}

std::unique_ptr<Scheduler> make_scheduler(const std::string& name) {
  if (name == "balanced") return std::make_unique<detail::BalancedScheduler>();
  if (name == "dp_balanced") return std::make_unique<detail::DpBalancedScheduler>();
  if (name == "local") return std::make_unique<detail::LocalScheduler>();
  std::string known;
  for (const auto& n : scheduler_names()) known += (known.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown scheduler '" + name + "'; known schedulers: " + known);
}

}  // namespace thdpack
