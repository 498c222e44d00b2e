#pragma once
// thdpack's JSONL reader before it used simdjson, kept as the baseline of jsonl_bench and of the
// test that compares the two readers line by line: lines read byte by byte from a std::istream,
// checked for NUL bytes and depth in one pass, then parsed event by event with nlohmann's SAX
// interface, falling back to the strict document reader (the one the library still falls back to)
// for anything that is not a valid sample.

#include <cstdint>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/data/jsonl_dataset.hpp"

namespace thdpack::bench {

/// The old detail::parse_jsonl_line: the same contract (InvalidArgument starting with `where`).
Sample baseline_parse_jsonl_line(const std::string& line, int64_t id, const JsonlOptions& options,
                                 const std::string& where);

/// The old load_jsonl_dataset's reading of `path`: its samples in order (ids 0, 1, ...).
std::vector<Sample> baseline_load_jsonl(const std::string& path, const JsonlOptions& options);

}  // namespace thdpack::bench
