#pragma once
// An indexed dataset's PREFIX.bin and PREFIX.idx as one unit (indexed_dataset.hpp):
// - the index ends with a seal that names the data file it was written with: its size and a
//   fingerprint of sampled blocks of its bytes, so that a reader detects a data file from another
//   write (two writers of the same prefix, a reader racing a replacement, a crash between the two
//   renames of a commit). The data file stays pure token bytes: Megatron's tools concatenate .bin
//   files (merge_datasets), and its readers ignore bytes after the document indices;
// - writers of one prefix exclude each other through a lock file beside it, which readers ask
//   whether a writer is at work (then a mismatch may be a commit in progress, worth waiting for).

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

namespace thdpack::detail {

/// The seal at the end of an index written by thdpack.
struct IndexSeal {
  uint64_t data_bytes = 0;   ///< size of the data file it was written with
  uint64_t fingerprint = 0;  ///< data_fingerprint of that file
};
inline constexpr int64_t kIndexSealBytes = 24;

/// The seal's bytes: "THDPSEAL", then the two fields (little-endian). Nothing in it varies between
/// two writes of the same data: converting twice gives byte-identical files.
std::array<std::byte, kIndexSealBytes> encode_seal(const IndexSeal& seal);
/// The seal at the end of `index`, if its last kIndexSealBytes bytes are one.
std::optional<IndexSeal> find_seal(std::span<const std::byte> index);

/// Reads `buffer.size()` bytes at `offset` of the data file into `buffer`.
using ReadBlock = std::function<void(int64_t offset, std::span<std::byte> buffer)>;
/// XXH64 of the size and of 17 blocks of 4 KiB spread evenly over a data file of `size` bytes
/// (first and last included): reading it costs the same for any size. Two writes whose data files
/// differ only between the sampled blocks, with equal sizes and equal indexes, are not told apart.
uint64_t data_fingerprint(int64_t size, const ReadBlock& read);
/// data_fingerprint of bytes in memory.
uint64_t data_fingerprint(std::span<const std::byte> data);

/// The lock of writers of `prefix`: the hidden file ".NAME.lock" beside it, locked (flock) for as
/// long as this object lives and removed when it ends (a killed writer's file stays, unlocked, and
/// is taken by the next one). Throws InvalidArgument naming the process that holds it (its PID is
/// written in the file) when another writer, in this process or another, has it.
class PrefixLock {
 public:
  explicit PrefixLock(const std::string& prefix);
  ~PrefixLock();
  PrefixLock(const PrefixLock&) = delete;
  PrefixLock& operator=(const PrefixLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

/// True while a writer holds the lock of `prefix` (PrefixLock); false when none does or no writer
/// ever made the lock file.
bool writer_active(const std::string& prefix);

/// The lock file's path for `prefix`; NAME shortened (with a digest of the whole) where the folder
/// takes no name that long.
std::string prefix_lock_path(const std::string& prefix);

}  // namespace thdpack::detail
