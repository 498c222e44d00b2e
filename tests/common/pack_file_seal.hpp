#pragma once
// Pack file layout (versions 3 and 4) for tests that damage files on purpose: where the header
// checksum is, and how to make both checksums right again after a change, so that a test (or a
// fuzz target) reaches the checks behind them, as a buggy or hostile writer would; and a version-4
// file turned into the version-3 file of the same packs, as older builds wrote it.
//
// magic (8) | version u64 | capacity i64 | divisor i64 | kind (u32 size + bytes) |
// spec (u32 size + bytes) | source size i64 | source fingerprint u64 | pack count u64 |
// sample count u64 | [version 4: JSONL options u64 | JSONL index entries u64] | header checksum
// u64 (XXH64 of everything before it) | offsets i64[packs + 1] | sample indices i64[samples] |
// [version 4: line offsets, line bytes, line numbers, sample lengths: i64[entries] each] |
// file checksum u64 (XXH64 of everything before it).

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
  uint64_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 8);
  const size_t spec_size_at = 36 + u32_at(32);
  if (bytes.size() < spec_size_at + 4) return 0;
  const size_t at = spec_size_at + 4 + u32_at(spec_size_at) + (version >= 4 ? 48 : 32);
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

/// The version-3 file of the packs of the complete version-4 file `bytes`: the JSONL options and
/// index left out, both checksums computed again.
inline std::string as_version_3(const std::string& bytes) {
  const size_t at = pack_file_header_checksum_at(bytes);
  uint64_t packs = 0, samples = 0;
  std::memcpy(&packs, bytes.data() + at - 32, 8);
  std::memcpy(&samples, bytes.data() + at - 24, 8);
  std::string old = bytes.substr(0, at - 16);
  const uint64_t version = 3;
  std::memcpy(old.data() + 8, &version, 8);
  old += std::string(8, '\0');  // the header checksum
  old += bytes.substr(at + 8, 8 * (packs + 1 + samples));
  old += std::string(8, '\0');  // the file checksum
  return resealed_pack_file(old);
}

}  // namespace thdpack::testing
