#pragma once
// Offline packing of a whole dataset into packs of capacity C (what `thdpack pack` does), the
// packed-dataset file a training job reads back as THD rows, and a streaming packer with a bounded
// number of open packs for use inside data loaders.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {

enum class PackStrategy {
  kBestFitDecreasing,  ///< thdpack's packer: O(n + C), lands on the L2 bound in practice
  kFirstFitDecreasing,
  kNextFit,  ///< input order (streaming-friendly, the weakest fill)
};

/// "bfd", "ffd", "next-fit".
PackStrategy pack_strategy_from_name(const std::string& name);
std::string pack_strategy_name(PackStrategy strategy);

struct OfflinePackOptions {
  int64_t capacity = 0;  ///< C, in padded tokens
  PackStrategy strategy = PackStrategy::kBestFitDecreasing;
  int64_t divisor = 1;  ///< each sample is padded to a multiple of this
  /// Seeded shuffle: the order of the packs (decreasing strategies; the packing itself, and so its
  /// fill, is unchanged) or the order of the samples (next-fit). No shuffle when unset.
  std::optional<uint64_t> shuffle_seed = {};
  /// Optional, one per sample: samples with the same id are packed together (GRPO groups,
  /// preference pairs). A group longer than C is an InvalidArgument.
  std::span<const int64_t> group_ids = {};
};

struct OfflinePacking {
  Bins packs;  ///< sample indices (positions in the input lengths) of each pack
  int64_t padded_tokens = 0;
  int64_t lower_bound_l1 = 0;
  int64_t lower_bound_l2 = 0;
  double fill = 0;  ///< padded tokens / (packs · C)
};

/// Packs samples of the given real lengths. Throws InvalidArgument when a sample (or group) does
/// not fit the capacity or a length is < 1.
OfflinePacking pack_offline(std::span<const int64_t> lengths, const OfflinePackOptions& options);

/// Packs a stream with at most `max_open_packs` packs open: each sample goes to the open pack with
/// the least room that fits it; when none fits a pack is opened, and when too many are open the
/// fullest is closed. Memory stays O(max_open_packs + samples in open packs).
class StreamingPacker {
 public:
  StreamingPacker(int64_t capacity, int64_t max_open_packs, int64_t divisor = 1);
  /// Adds sample `id` of `length` tokens; packs it closes are appended to `closed`.
  void add(int64_t id, int64_t length, std::vector<std::vector<int64_t>>& closed);
  /// Closes every open pack (fullest first) into `closed`.
  void flush(std::vector<std::vector<int64_t>>& closed);
  int64_t open_packs() const { return static_cast<int64_t>(open_.size()); }

 private:
  struct OpenPack {
    std::vector<int64_t> ids;
    int64_t used = 0;
  };
  void close(size_t index, std::vector<std::vector<int64_t>>& closed);

  int64_t capacity_;
  int64_t max_open_;
  int64_t divisor_;
  std::vector<OpenPack> open_;
};

/// Where a packed dataset's samples come from, as recorded in the pack file.
struct PackSource {
  std::string kind;  ///< "indexed" (data path: prefix or weighted blend), "jsonl", "mock"
  std::string spec;  ///< the data path, the JSONL path, or the mock config JSON
  int64_t size = 0;  ///< samples of the source (checked when reopening)
};

/// Writes a pack file (version 2): magic "THDPACKS", version, capacity, divisor, source, counts, a
/// checksum of that header, pack offsets and the sample indices of every pack. Each sample of the
/// source appears at most once (all of them unless packing stopped early). Throws InvalidArgument
/// when an index is outside the source or repeated, or the file cannot be written.
void write_pack_file(const std::string& path, const Bins& packs, int64_t capacity, int64_t divisor,
                     const PackSource& source);

/// A packed dataset: the pack file and its reopened source. Pack p is one THD row.
class PackedDataset {
 public:
  /// Opens the pack file and its source; throws InvalidArgument naming the file and byte when the
  /// file is damaged or the source no longer matches.
  static std::unique_ptr<PackedDataset> open(const std::string& path);

  int64_t num_packs() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t capacity() const { return capacity_; }
  int64_t divisor() const { return divisor_; }
  const PackSource& source() const { return source_; }
  const Dataset& dataset() const { return *dataset_; }
  /// Sample indices of pack p.
  std::span<const int64_t> pack(int64_t p) const;
  /// Pack p as a THD row (pack_samples with the file's divisor and capacity; `options` gives the
  /// pad and ignore ids).
  PackedBatch batch(int64_t p, const PackOptions& options = {}) const;

 private:
  PackedDataset() = default;
  int64_t capacity_ = 0;
  int64_t divisor_ = 1;
  PackSource source_;
  std::unique_ptr<Dataset> dataset_;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> ids_;
};

/// Opens a dataset from a PackSource (the inverse of what `thdpack pack` records).
std::unique_ptr<Dataset> open_pack_source(const PackSource& source);

}  // namespace thdpack
