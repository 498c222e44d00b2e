#pragma once
// Pack files: the packed-dataset file `thdpack pack` writes (the packs of a source dataset), which
// a training job reads back as THD rows.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {

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
