// Fuzz target: the pack-file reader (detail::parse_pack_file, what PackedDataset::open runs on the
// file before it opens the source). Each input is parsed as it is, where the checksums reject
// nearly every change, and again with both checksums made right (resealed_pack_file), so the
// checks behind them are reached too. InvalidArgument is an expected outcome; whatever is accepted
// must be a well-formed list of packs.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/readers.hpp"
#include "fuzz_check.hpp"
#include "pack_file_seal.hpp"
#include "thdpack/core/errors.hpp"

namespace {

void check(const std::string& bytes) {
  thdpack::detail::PackFileContents c;
  try {
    c = thdpack::detail::parse_pack_file(
        std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), "fuzz.thdpacks");
  } catch (const thdpack::InvalidArgument&) {
    return;
  }
  FUZZ_CHECK(c.capacity >= 1 && c.divisor >= 1);
  FUZZ_CHECK(!c.offsets.empty() && c.offsets.front() == 0);
  FUZZ_CHECK(c.offsets.back() == static_cast<int64_t>(c.ids.size()));
  for (size_t p = 1; p < c.offsets.size(); ++p) FUZZ_CHECK(c.offsets[p] >= c.offsets[p - 1]);
  FUZZ_CHECK(static_cast<int64_t>(c.ids.size()) <= c.source.size);
  for (int64_t id : c.ids) FUZZ_CHECK(id >= 0 && id < c.source.size);
  std::vector<int64_t> sorted = c.ids;
  std::sort(sorted.begin(), sorted.end());
  FUZZ_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  check(bytes);
  check(thdpack::testing::resealed_pack_file(bytes));
  return 0;
}
