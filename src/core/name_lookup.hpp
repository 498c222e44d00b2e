#pragma once
// Lookup of built-in things by name (model presets, workloads, schedulers) with one error style.

#include <string>
#include <vector>

#include "thdpack/core/errors.hpp"

namespace thdpack::detail {

/// "a, b, c"
inline std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// InvalidArgument "unknown <kind> '<name>'; known <kind>s: a, b, c".
[[noreturn]] inline void throw_unknown_name(const std::string& kind, const std::string& name,
                                            const std::vector<std::string>& known) {
  fail("unknown ", kind, " '", name, "'; known ", kind, "s: ", join_names(known));
}

}  // namespace thdpack::detail
