#pragma once
// In-memory entry points of the file readers. The path-based readers of the public headers
// (load_jsonl_dataset, read_lengths_file, IndexedDataset::open, PackedDataset::open) are thin
// wrappers around these, and the fuzz targets in tests/fuzz call them directly, so what is fuzzed
// is what users run. Errors are the same InvalidArgument, naming the file (`name`) and the
// position.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/indexed_pair.hpp"
#include "data/jsonl_index.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/pack_file.hpp"

namespace thdpack::detail {

/// One non-blank JSONL line as sample `id`; `where` ("file:line") starts every error message.
Sample parse_jsonl_line(const std::string& line, int64_t id, const JsonlOptions& options,
                        const std::string& where);
/// The same through a whole JSON document (what parse_jsonl_line falls back to for a line that is
/// not a valid sample, to say why): both give equal samples for every valid line.
Sample parse_jsonl_document(const std::string& line, int64_t id, const JsonlOptions& options,
                            const std::string& where);

/// The lengths in a lengths file's text (see read_lengths_file); `name` is the file in messages.
std::vector<int64_t> parse_lengths(std::istream& in, const std::string& name);
/// parse_lengths of an open lengths file, read through its descriptor.
std::vector<int64_t> read_lengths(const InputFile& file);

// The readers of already open files: a pack file's source is opened once, and its fingerprint
// hashes the very files its dataset reads (see PackedDataset::open).

/// load_jsonl_dataset of `file`, which the dataset leases for its life.
std::unique_ptr<Dataset> load_jsonl(std::shared_ptr<const InputFile> file,
                                    const JsonlOptions& options);
/// make_mock_dataset whose file-mode lengths file is `lengths` (config.path is not opened).
std::unique_ptr<Dataset> make_mock_dataset(const MockConfig& config, const MockContent& content,
                                           std::shared_ptr<const InputFile> lengths);
/// open_indexed_datasets, calling `opened` with each IndexedDataset in the data path's order.
std::unique_ptr<Dataset> open_indexed_datasets(
    const std::string& data_path, int64_t size,
    const std::function<void(const IndexedDataset&)>& opened);

/// What a Megatron .idx holds, validated on its own (everything but the size of .bin).
struct IndexContents {
  TokenDType dtype = TokenDType::kInt32;
  std::vector<int32_t> lengths;
  int64_t pointers_at = 0;  ///< byte offset of the int64 pointer array in the index
  std::vector<int64_t> document_indices;
  bool has_modes = false;  ///< a trailing int8 mode per sequence (multimodal indexes)
  int64_t data_bytes = 0;  ///< bytes of .bin the sequences cover (the running sum of the pointers)
  std::optional<IndexSeal>
      seal;  ///< what a thdpack writer sealed the index with (indexed_pair.hpp)
};

/// Parses and validates the bytes of `idx_name` (see indexed_dataset.hpp for the checks); pointers
/// that disagree with the lengths name `bin_name`.
IndexContents parse_index(std::span<const std::byte> idx, const std::string& idx_name,
                          const std::string& bin_name);

/// Throws InvalidArgument unless a .bin of `bin_bytes` bytes is exactly what `index` covers: the
/// message names the first sequence that runs past the end, or the first byte no sequence covers.
void check_data_size(const IndexContents& index, int64_t bin_bytes, const std::string& idx_name,
                     const std::string& bin_name);

/// Throws InvalidArgument unless `bin` is the data file `index` describes: for a sealed index, the
/// one it was written with (size and fingerprint; the message calls the pair mixed), otherwise one
/// of the size it covers (check_data_size).
void check_pair(const IndexContents& index, std::span<const std::byte> bin,
                const std::string& idx_name, const std::string& bin_name);

/// Converts `out.size()` tokens of `dtype` at `data` to int64. Returns the position of the first
/// token that is not an integer in int64 range (only floating-point dtypes can hold one), or -1.
int64_t decode_tokens(const std::byte* data, TokenDType dtype, std::span<int64_t> out);

/// What a pack file holds, validated on its own (everything but its source): the checksums, the
/// counts against the file size, offsets that rise, sample indices inside the source and none
/// listed twice, a JSONL index whose lines follow each other. Errors name `name` and the byte.
struct PackFileContents {
  uint64_t version = 0;
  int64_t capacity = 0;
  int64_t divisor = 1;
  PackSource source;
  uint64_t fingerprint = 0;
  std::vector<int64_t> offsets;
  std::vector<int64_t> ids;
  /// A JSONL source's options (version 3: the defaults) and index (empty: none recorded).
  JsonlIndex jsonl_index;
};
PackFileContents parse_pack_file(std::span<const std::byte> bytes, const std::string& name);

}  // namespace thdpack::detail
