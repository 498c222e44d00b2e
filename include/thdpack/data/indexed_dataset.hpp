#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Megatron-LM's indexed dataset (`<prefix>.bin` + `<prefix>.idx`), memory-mapped, exactly as
// Megatron-LM and NeMo write it:
//
//   .idx  magic "MMIDIDX\0\0" (9 bytes) | version u64 = 1 | dtype code u8 | sequence count u64 |
//         document count u64 | sequence lengths i32[sequence count] |
//         sequence pointers i64[sequence count] (byte offsets into .bin) |
//         document indices i64[document count] (sequence-index boundaries: 0, ..., sequence count)
//         [| sequence modes i8[sequence count], multimodal files only]
//         [| seal: "THDPSEAL" | .bin size u64 | .bin fingerprint u64]
//   .bin  the token ids of every sequence, back to back, in the dtype
//
// The two files are one unit. IndexedDatasetWriter seals the index with the size and a fingerprint
// (sampled blocks) of the .bin it was written with, and holds a lock (".NAME.lock" beside the
// prefix) from construction to the end of finish(): a second writer of the same prefix, in any
// process, is refused with one line. Opening a sealed dataset whose .bin is not the one its index
// was written with (two writes mixed: a crash between the two renames of a commit, or a replacement
// racing the open) waits while a writer holds the lock (the commit in progress) and then refuses
// with one line naming any old .bin a commit kept beside it. Megatron's readers stop at the
// document indices (or modes) and do not see the seal; indexes without one (written by Megatron or
// NeMo) open as before, with only the size check.
//
// dtype codes: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16.
// Sample i of the Dataset is sequence i; lengths come from the index without touching .bin.
// Opening validates everything it reads and throws InvalidArgument naming the file and the byte
// or sequence position: wrong magic, version or dtype code, counts that do not fit the file,
// negative or zero lengths, pointers that are not the running sum of the lengths or that run past
// the end of .bin, document indices that decrease or do not run from 0 to the sequence count
// (equal neighbours are an empty document, which Megatron writes for a record without tokens).

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "thdpack/core/dataset.hpp"

namespace thdpack {

enum class TokenDType : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

/// Bytes per token of a dtype.
int token_size(TokenDType dtype);
/// "uint16", "int32", ...
std::string token_dtype_name(TokenDType dtype);
/// The dtype called `name`; throws InvalidArgument for others.
TokenDType token_dtype_from_name(const std::string& name);

class OutputFile;
namespace detail {
class PrefixLock;
}

/// A memory-mapped indexed dataset. Its files are leased as inputs in use (input_file.hpp). A file
/// cut shorter while open is an InvalidArgument naming it when sample() next reads it, not a
/// SIGBUS; only a file cut during the copy of one sample's tokens can still fault.
class IndexedDataset final : public Dataset {
 public:
  /// Opens `<prefix>.idx` and `<prefix>.bin` and validates them (see the header comment).
  static std::unique_ptr<IndexedDataset> open(const std::string& prefix);
  ~IndexedDataset() override;

  int64_t size() const override { return static_cast<int64_t>(lengths_.size()); }
  int64_t length(int64_t index) const override;
  /// The tokens of sequence `index` as int64. Floating-point dtypes must hold integers that fit
  /// int64, else InvalidArgument names the .bin byte and the sequence.
  Sample sample(int64_t index) const override;
  std::string describe() const override;
  std::string locate(int64_t index) const override;

  TokenDType dtype() const { return dtype_; }
  /// Every sequence length (copied out of the index once: its arrays are not aligned).
  std::span<const int32_t> lengths() const { return lengths_; }
  /// Byte offset of sequence `index` in .bin.
  int64_t pointer(int64_t index) const;
  std::span<const int64_t> document_indices() const { return document_indices_; }
  const std::string& prefix() const { return prefix_; }
  /// The bytes of `<prefix>.idx` as mapped at open (the file opened, whatever is at the path now);
  /// InvalidArgument when that file has shrunk since.
  std::span<const std::byte> index_bytes() const;

 private:
  IndexedDataset() = default;
  struct Mapping;

  std::string prefix_;
  TokenDType dtype_ = TokenDType::kInt32;
  std::unique_ptr<Mapping> index_;
  std::unique_ptr<Mapping> data_;
  int64_t pointers_at_ = 0;  // byte offset of the pointer array in .idx
  std::vector<int32_t> lengths_;
  std::vector<int64_t> document_indices_;
};

/// Writes an indexed dataset in Megatron's format. Sequences are appended in order; documents are
/// closed explicitly (Megatron's end_document) or, if never, one sequence per document.
class IndexedDatasetWriter {
 public:
  /// Starts `<prefix>.bin` and `<prefix>.idx` as OutputFiles: both are refused when either is an
  /// input in use (an open dataset, a source being read), and they replace what is at their paths
  /// only when finish() completes; a writer destroyed before that leaves the paths untouched.
  /// Throws InvalidArgument when the files cannot be created.
  IndexedDatasetWriter(const std::string& prefix, TokenDType dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  /// Appends one sequence. Throws InvalidArgument if it is empty or a token does not fit the
  /// dtype.
  void add_sequence(std::span<const int64_t> tokens);
  /// Appends a sequence of `length` tokens without writing them: .bin grows as a sparse hole
  /// that reads as token 0. For benchmarks and tests that only need lengths.
  void add_length_only(int64_t length);
  /// Closes the current document (the sequences since the previous call).
  void end_document();
  /// Writes `<prefix>.idx` and moves both files into place. Every call after it (finish too)
  /// throws InvalidArgument: the dataset is complete. When it throws, nothing is complete: later
  /// calls (finish included) throw InvalidArgument saying so.
  void finish();

 private:
  void require_open(const char* call) const;
  void write_and_commit();

  std::string prefix_;
  TokenDType dtype_;
  std::unique_ptr<detail::PrefixLock> lock_;  ///< held from construction to the end of finish()
  std::unique_ptr<OutputFile> bin_;
  int64_t bin_bytes_ = 0;
  bool holes_ = false;
  bool finished_ = false;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> document_indices_{0};
};

/// Megatron's blend of several datasets: sample i comes from the dataset whose share is most
/// behind its weight (Megatron's build_blending_indices), taking that dataset's samples in order
/// and wrapping around at its end. Weights are normalised; all must be > 0. When a weight asks for
/// more samples than its dataset holds, the constructor warns once on stderr ("thdpack: warning:
/// ...") with the repeat factor: Megatron repeats them silently.
class BlendedDataset final : public Dataset {
 public:
  BlendedDataset(std::vector<std::shared_ptr<const Dataset>> datasets, std::vector<double> weights,
                 int64_t size);

  int64_t size() const override { return static_cast<int64_t>(dataset_index_.size()); }
  int64_t length(int64_t index) const override;
  /// The sample, with its id set to `index` (the blend's numbering).
  Sample sample(int64_t index) const override;
  std::string describe() const override;
  std::string locate(int64_t index) const override;

  /// Which dataset and which of its samples blend sample `index` is.
  std::pair<int, int64_t> source(int64_t index) const;

 private:
  void warn_of_repeats(const std::vector<int64_t>& taken) const;

  std::vector<std::shared_ptr<const Dataset>> datasets_;
  std::vector<double> weights_;
  std::vector<int16_t> dataset_index_;
  std::vector<int64_t> sample_index_;
};

/// Opens a data path as Megatron users write it: "prefix" or "w1 prefix1 w2 prefix2 ..." (a blend
/// of `size` samples, default the sum of the datasets' sizes).
std::unique_ptr<Dataset> open_indexed_datasets(const std::string& data_path, int64_t size = 0);

}  // namespace thdpack
