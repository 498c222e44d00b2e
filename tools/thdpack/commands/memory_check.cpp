#include "commands/memory_check.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "reports/table.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack::cli {
namespace {

// The first number in `path` ("max" or an unreadable file: none).
double number_in(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return 0;
  try {
    return std::stod(word);
  } catch (...) {
    return 0;
  }
}

// The memory limit of this process's cgroup: v2 (the path of "0::/PATH" in /proc/self/cgroup),
// else v1's memory controller. 0 when there is none.
double cgroup_limit() {
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    if (line.rfind("0::", 0) == 0) {
      const double v2 = number_in("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
      if (v2 > 0) return v2;
    }
  }
  const double v1 = number_in("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  return v1 > 0 && v1 < 1e18 ? v1 : 0;  // v1 says "no limit" with a huge number
}

void take_smaller(MemoryLimit& limit, double bytes, const std::string& source) {
  if (bytes > 0 && (limit.bytes == 0 || bytes < limit.bytes)) limit = {bytes, source};
}

}  // namespace

MemoryLimit memory_limit() {
  MemoryLimit limit;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    take_smaller(limit, static_cast<double>(pages) * static_cast<double>(page_size),
                 "this machine's memory");
  }
  struct rlimit address_space {};
  if (::getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
    take_smaller(limit, static_cast<double>(address_space.rlim_cur),
                 "its address-space limit, ulimit -v");
  }
  take_smaller(limit, cgroup_limit(), "its cgroup's memory limit");
  return limit;
}

void require_memory(double needed, const std::string& task, const std::string& fix) {
  const MemoryLimit limit = memory_limit();
  if (limit.bytes > 0 && needed > limit.bytes) {
    fail(task, " needs about ", fixed(needed / 1e9, 1), " GB of memory; this process may use ",
         fixed(limit.bytes / 1e9, 1), " GB (", limit.source, "): ", fix);
  }
}

}  // namespace thdpack::cli
