#pragma once
// The naive workload-aware baseline of BENCHMARKS.md: first-fit-decreasing packs, then
// longest-processing-time over packs with K packs per replica. "The floor, not the goal."

#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::bench {

Plan naive_ffd_lpt(const ScheduleInput& input, const ScheduleOptions& options);

}  // namespace thdpack::bench
