#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Hugging Face `datasets` data as it lies on disk or in memory: the Arrow IPC stream files that
// `Dataset.save_to_disk` writes (data-00000-of-00001.arrow, ...) and a dataset's cache files are,
// and any Arrow table handed over through the Arrow C stream interface (a pyarrow Table: no row is
// copied). Rows become samples exactly as load_parquet_dataset makes them (the same columns,
// checks, ids and TableLayout). Part of the Parquet library (thdpack_parquet); a build without it
// throws one line saying how to enable it.

#include <memory>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/data/parquet_dataset.hpp"

struct ArrowArrayStream;  // the Arrow C stream interface (arrow/c/abi.h)

namespace thdpack {

/// The Arrow files `paths` name, in dataset order: a file as it is; a folder `save_to_disk` wrote,
/// the files its state.json lists, in that order; another folder, every `*.arrow` directly in it,
/// sorted by name; a path with `*`, `?` or `[` a glob, its matches sorted. Throws InvalidArgument
/// naming the path when it does not exist, matches nothing, is a DatasetDict's folder (naming its
/// splits), or a folder holds no `*.arrow`; and for a file named twice.
std::vector<std::string> expand_arrow_paths(const std::vector<std::string>& paths);

/// Opens the Arrow IPC files of `paths` (expand_arrow_paths; the stream format datasets writes,
/// or the file format) as one dataset. Each file is memory-mapped and its record batches used in
/// place; loading checks every row (the errors of load_parquet_dataset, naming the file, record
/// batch and row) and keeps the lengths. A truncated or damaged file is one line naming it.
std::unique_ptr<Dataset> load_arrow_dataset(const std::vector<std::string>& paths,
                                            const ParquetOptions& options = {});

/// The table of `stream` (an ArrowArrayStream, released by this call) as a dataset: its record
/// batches are kept (not copied) for the dataset's life; `name` stands for a file in messages.
std::unique_ptr<Dataset> load_arrow_stream_dataset(ArrowArrayStream* stream,
                                                   const ParquetOptions& options = {},
                                                   const std::string& name = "Arrow table");

/// The samples rows[0], rows[1], ... of `table` as a dataset of their own (sample i is row
/// rows[i], its id i): what a Hugging Face dataset's indices mapping (select, shuffle, filter)
/// makes of its table. Rows may repeat. Throws InvalidArgument when `rows` is empty or a row is
/// outside [0, table->size()), naming `name` and the position.
std::unique_ptr<Dataset> select_rows(std::unique_ptr<Dataset> table, std::vector<int64_t> rows,
                                     const std::string& name);

/// The pack-source spec of Arrow files (PackSource{"arrow", spec}), as parquet_source_spec.
std::string arrow_source_spec(const std::vector<std::string>& files, const ParquetOptions& options);

/// Makes pack files with an "arrow" source readable: their files are reopened with
/// load_arrow_dataset, their fingerprint is of each file's size and bytes. Idempotent.
void register_arrow_pack_source();

}  // namespace thdpack
