#pragma once
// How much memory a command may use, and the up-front refusal of a job that would not fit: a job
// that runs out of memory halfway is killed (or gets std::bad_alloc) long after the mistake.

#include <string>

namespace thdpack::cli {

/// The least of: physical memory, the address-space limit (RLIMIT_AS, `ulimit -v`) and the
/// memory limit of the process's cgroup (v2 memory.max, v1 memory.limit_in_bytes); `source`
/// names which one it is, for messages.
struct MemoryLimit {
  double bytes = 0;  ///< 0 when none could be read
  std::string source;
};
MemoryLimit memory_limit();

/// Throws InvalidArgument when `needed` bytes exceed memory_limit(): "`task` needs about N GB of
/// memory; this process may use M GB (SOURCE): `fix`".
void require_memory(double needed, const std::string& task, const std::string& fix);

}  // namespace thdpack::cli
