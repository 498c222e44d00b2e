#pragma once
// Pack file layout (version 3) for tests that damage files on purpose: where the header checksum
// is, and how to make both checksums right again after a change, so that a test (or a fuzz target)
// reaches the checks behind them, as a buggy or hostile writer would.
//
// magic (8) | version u64 | capacity i64 | divisor i64 | kind (u32 size + bytes) |
// spec (u32 size + bytes) | source size i64 | source fingerprint u64 | pack count u64 |
// sample count u64 | header checksum u64 (XXH64 of everything before it) | offsets i64[packs + 1]
// | sample indices i64[samples] | file checksum u64 (XXH64 of everything before it).

#include <cstdint>
#include <cstring>
#include <string>

#include "thdpack/core/hash64.hpp"

namespace thdpack::testing {

/// Byte offset of the header checksum, or 0 when `bytes` is too short to hold one.
inline size_t pack_file_header_checksum_at(const std::string& bytes) {
  auto u32_at = [&](size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + at, 4);
    return static_cast<size_t>(v);
  };
  if (bytes.size() < 36) return 0;
  const size_t spec_size_at = 36 + u32_at(32);
  if (bytes.size() < spec_size_at + 4) return 0;
  const size_t at = spec_size_at + 4 + u32_at(spec_size_at) + 32;
  return bytes.size() >= at + 8 ? at : 0;
}

/// `bytes` with its header checksum and (when the file is longer than its header) its file
/// checksum computed again.
inline std::string resealed_pack_file(std::string bytes) {
  const size_t at = pack_file_header_checksum_at(bytes);
  if (at == 0) return bytes;
  const uint64_t header = Hash64::of(bytes.data(), at);
  std::memcpy(bytes.data() + at, &header, 8);
  if (bytes.size() >= at + 16) {
    const size_t end = bytes.size() - 8;
    const uint64_t file = Hash64::of(bytes.data(), end);
    std::memcpy(bytes.data() + end, &file, 8);
  }
  return bytes;
}

}  // namespace thdpack::testing
