// Fuzz target: the lengths file parser (detail::parse_lengths, what read_lengths_file runs on the
// file's text). InvalidArgument is an expected outcome; anything else is a finding.

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "data/readers.hpp"
#include "fuzz_check.hpp"
#include "thdpack/core/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<int64_t> lengths;
  try {
    lengths = thdpack::detail::parse_lengths(in, "fuzz.csv");
  } catch (const thdpack::InvalidArgument& e) {
    FUZZ_CHECK(std::string(e.what()).size() <= thdpack::fuzz::kLongestMessage);
    return 0;
  }
  FUZZ_CHECK(!lengths.empty());
  for (int64_t len : lengths) FUZZ_CHECK(len >= 1);
  // The lengths written back one per line (under a header) read back the same.
  std::string text = "seq_len\n";
  for (int64_t len : lengths) text += std::to_string(len) + "\n";
  std::istringstream again(text);
  FUZZ_CHECK(thdpack::detail::parse_lengths(again, "again.csv") == lengths);
  // A byte order mark before the first length loses nothing (it is no header).
  std::string bare = "\xEF\xBB\xBF";
  for (int64_t len : lengths) bare += std::to_string(len) + "\n";
  std::istringstream with_bom(bare);
  FUZZ_CHECK(thdpack::detail::parse_lengths(with_bom, "bom.csv") == lengths);
  return 0;
}
