#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Pre-tokenized Parquet (SPEC §2, §11): one sample per row, its tokens in a list column (Hugging
// Face datasets' `input_ids`), with an optional loss-mask or labels column. Read with the Arrow and
// Parquet C++ libraries of pyarrow's wheel; a build without them (THDPACK_WITH_PARQUET=OFF, or no
// pyarrow found) keeps this interface and every function throws one line saying how to enable it.

#include <memory>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"

namespace thdpack {

/// How the rows of a table hold samples.
enum class TableLayout {
  kRows,          ///< one sample per row
  kBridgePacked,  ///< one pack per row, as Megatron-Bridge's packed Parquet (bridge_parquet.hpp)
};

/// Options of the Parquet (and Arrow) reader: which columns hold what.
struct ParquetOptions {
  /// The token ids: list<integer> (any width, signed or unsigned; list or large_list).
  std::string tokens_column = "input_ids";
  /// Optional 0/1 per token: list of integers, booleans or floats (empty: none).
  std::string loss_mask_column;
  /// Optional labels aligned with the tokens, -100 where ignored: list<integer> (empty: none).
  std::string labels_column;
  /// Treat the labels as already shifted (position j's target) instead of aligned with the tokens.
  bool labels_shifted = false;
  /// kBridgePacked: each row is a pack of samples back to back, sample k starting at
  /// `seq_start_column`[k] and ending where the next starts (the last at the row's end); the
  /// loss-mask column then holds each position's weight (position j predicts token j+1, as
  /// write_bridge_parquet writes it), turned back into a mask per token (a sample's first token is
  /// never a target). A labels column is refused.
  TableLayout layout = TableLayout::kRows;
  /// kBridgePacked: the list<integer> column of sample starts.
  std::string seq_start_column = "seq_start_id";
  /// Threads that read and check the row groups when the dataset opens, each holding one decoded
  /// row group at a time (0: the machine's hardware threads, at most 8). The dataset, its samples
  /// and its errors do not depend on it: a value error is always the first in file order.
  unsigned threads = 0;
  /// Bytes of decoded row groups that sample() and samples() keep for the next calls (the least
  /// recently used go first; the one just read stays whatever its size).
  int64_t cache_bytes = int64_t{1} << 30;
};

/// Whether this build reads Parquet (THDPACK_WITH_PARQUET found pyarrow's C++ libraries).
bool parquet_supported();

/// The Parquet files `paths` name, in dataset order: a file as it is; a directory, every
/// `*.parquet` directly in it, sorted by name; a path with `*`, `?` or `[` a glob, its matches
/// sorted. Each path's files follow the previous path's; a file named twice is an error. Throws
/// InvalidArgument naming the path when it does not exist, matches nothing, or a directory holds
/// no `*.parquet`.
std::vector<std::string> expand_parquet_paths(const std::vector<std::string>& paths);

/// Opens the Parquet files of `paths` (expand_parquet_paths) as one dataset: sample i is row i
/// counting across the files in order (its id is that global row index). Loading reads the columns
/// row group by row group, several side by side (ParquetOptions::threads; never a whole file at
/// once), validates every value and keeps only the lengths. sample() and samples() read the row
/// groups they need again, side by side, each once per call, and keep what they read while it fits
/// in ParquetOptions::cache_bytes. A row becomes a sample
/// as a JSONL line does: at least one token, ids in [0, 2^63), loss mask 0/1, labels >= 0 or -100,
/// each list as long as the tokens. Empty row groups and files without rows are fine. Throws
/// InvalidArgument with one line naming the file (and, for a value, the row group and the file's
/// 0-based row) for: a damaged or truncated file, a missing column, a column that is not a list of
/// the right kind (list<string>, float tokens), a null list or a null inside one, an empty list,
/// a negative id or one past int64, both loss mask and labels given, lists of unequal length, and
/// a column whose type differs between files; also when no file holds a row. With
/// TableLayout::kBridgePacked also for sample starts that do not begin at 0, do not increase, or
/// reach past the row.
std::unique_ptr<Dataset> load_parquet_dataset(const std::vector<std::string>& paths,
                                              const ParquetOptions& options = {});

/// The pack-source spec of a Parquet dataset (PackSource{"parquet", spec}): JSON with the
/// absolute file list and the options, so that a pack file reopens the same files.
std::string parquet_source_spec(const std::vector<std::string>& files,
                                const ParquetOptions& options);

/// Makes pack files with a "parquet" source readable (register_pack_source_kind): their datasets
/// are reopened with load_parquet_dataset, their fingerprint is of each file's size and footer
/// (the Parquet metadata: row counts, column chunk offsets, sizes and statistics). Idempotent.
void register_parquet_pack_source();

}  // namespace thdpack
