#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Lengths files: one sample length per line, the cheapest way to plan a real dataset.

#include <cstdint>
#include <string>
#include <vector>

namespace thdpack {

/// Reads a lengths file: one positive integer per line; an optional non-numeric header line first;
/// blank lines are skipped. Anything else throws InvalidArgument naming the file and line.
std::vector<int64_t> read_lengths_file(const std::string& path);

}  // namespace thdpack
