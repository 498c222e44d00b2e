#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Pack files: the packed-dataset file `thdpack pack` writes (the packs of a source dataset), which
// a training job reads back as THD rows.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {

/// Where a packed dataset's samples come from, as recorded in the pack file.
struct PackSource {
  /// "indexed" (data path: prefix or weighted blend), "jsonl", "mock", or a registered kind
  /// ("parquet", register_pack_source_kind)
  std::string kind;
  std::string spec;  ///< the data path, the JSONL path, the mock config JSON, or the kind's spec
  int64_t size = 0;  ///< samples of the source (checked when reopening)
};

/// Writes a pack file (version 4): magic "THDPACKS", version, capacity, divisor, source, the
/// source's content fingerprint (source_fingerprint), counts, the options a JSONL source was read
/// with and the size of its index (0 for other sources, and for a JSONL source written without
/// one), an XXH64 checksum of that header, pack offsets, the sample indices of every pack, the
/// JSONL index (for each sample of the source: the byte offset of its line in the JSONL file, the
/// line's length in bytes without its '\n', its line number from 1, its token count) and an XXH64
/// checksum of every byte before it. Each sample of the source appears at most once (all of them
/// unless packing stopped early). The file is an OutputFile: refused when `path` is an input in use
/// (the source itself, say), and it replaces what is at `path` only once complete. Throws
/// InvalidArgument when an index is outside the source or repeated, or the file cannot be written.
/// This form opens the source's files to fingerprint them (source_fingerprint); a JSONL source is
/// read whole (open_pack_source_once, default JsonlOptions) for its index. A caller that already
/// read the source passes the fingerprint of what it read and the dataset it read (below).
void write_pack_file(const std::string& path, const Bins& packs, int64_t capacity, int64_t divisor,
                     const PackSource& source);
/// write_pack_file recording `fingerprint` (OpenedPackSource::fingerprint of the source the packs
/// were built from) instead of opening the source's files again to compute it: the fingerprint is
/// of what was read, not of what is at the paths now. A JSONL source gets no index (and the
/// default JsonlOptions): opening the file reads the JSONL whole, as a version-3 file does.
void write_pack_file(const std::string& path, const Bins& packs, int64_t capacity, int64_t divisor,
                     const PackSource& source, uint64_t fingerprint);
/// write_pack_file recording `fingerprint` and, for a JSONL source, the index and options of
/// `dataset`, the dataset the packs were built from (OpenedPackSource::dataset, or
/// load_jsonl_dataset of the source): opening the file then reads no line of the JSONL until a
/// sample is asked for. InvalidArgument when the source is JSONL and `dataset` is not a JSONL
/// dataset so read, or has another size than the source. Other sources ignore `dataset`.
void write_pack_file(const std::string& path, const Bins& packs, int64_t capacity, int64_t divisor,
                     const PackSource& source, uint64_t fingerprint, const Dataset& dataset);

/// A packed dataset: the pack file and its reopened source. Pack p is one THD row.
class PackedDataset {
 public:
  /// Opens the pack file and its source; throws InvalidArgument naming the file (and the byte)
  /// when the file is damaged (either checksum), of another version than 3 or 4, or its source no
  /// longer matches (another sample count or another content fingerprint). The fingerprint is
  /// always computed from the source's files. A JSONL source is read with the JsonlOptions the
  /// file records (version 3: the defaults); when the file has its index (version 4, see
  /// write_pack_file) and the fingerprint matches, no line is read on open: dataset() reads and
  /// parses a sample's line when it is asked for (the same samples as load_jsonl_dataset gives;
  /// a line that no longer reads as the index says is an InvalidArgument naming "file:line").
  /// Without an index the JSONL is read whole. The pack file stays leased as an input in use
  /// while the PackedDataset lives, and so does the JSONL file.
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
  std::unique_ptr<InputLease> lease_;
  std::unique_ptr<Dataset> dataset_;
  std::vector<int64_t> offsets_;
  std::vector<int64_t> ids_;
};

/// The fingerprint of a source's content, XXH64 over: the bytes of every `.idx` of an indexed data
/// path (lengths and pointers: tokens rewritten in place with the same lengths are not seen), the
/// bytes of a JSONL file, the bytes of a file-mode mock config's lengths file (other mocks are
/// defined by their config alone). Throws InvalidArgument naming a file that cannot be read.
uint64_t source_fingerprint(const PackSource& source);

/// Opens a dataset from a PackSource (the inverse of what `thdpack pack` records).
std::unique_ptr<Dataset> open_pack_source(const PackSource& source);

/// A source opened once: its dataset, and the source_fingerprint of the very files that dataset
/// reads, hashed through the descriptors it holds (whatever is at the paths later).
struct OpenedPackSource {
  std::unique_ptr<Dataset> dataset;
  uint64_t fingerprint = 0;
};
/// open_pack_source, opening each file of the source by path exactly once and fingerprinting what
/// was opened; a JSONL source is read with `jsonl_options`.
OpenedPackSource open_pack_source_once(const PackSource& source,
                                       const JsonlOptions& jsonl_options = {});

/// Opens a source of a kind that lives outside the core library (Parquet, whose reader links
/// Arrow): its dataset and the fingerprint of what was read, as open_pack_source_once.
using PackSourceOpener = std::function<OpenedPackSource(const PackSource&)>;
/// Makes open_pack_source_once, open_pack_source, source_fingerprint and PackedDataset::open read
/// sources of `kind` with `open` (replacing an earlier registration of it). The built-in kinds
/// cannot be replaced: InvalidArgument. Thread-safe.
void register_pack_source_kind(const std::string& kind, PackSourceOpener open);

}  // namespace thdpack
