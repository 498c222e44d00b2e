#pragma once
// A Parquet pack source's spec (parquet_source_spec) read back.

#include <memory>
#include <string>
#include <vector>

#include "thdpack/core/hash64.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/data/parquet_dataset.hpp"

namespace thdpack::detail {

struct ParquetSourceSpec {
  std::vector<std::string> files;  ///< absolute, in dataset order
  ParquetOptions options;
};

/// The files and options parquet_source_spec wrote; InvalidArgument when `spec` is not such JSON.
ParquetSourceSpec parse_parquet_source_spec(const std::string& spec);

/// Opens table files (Parquet or Arrow) as one dataset, adding each file's bytes to `hash`.
using OpenTableFiles = std::unique_ptr<Dataset> (*)(const std::vector<std::string>& paths,
                                                    const ParquetOptions& options, Hash64* hash);

/// A pack file's table source reopened: its spec's files through `open_files`, its fingerprint the
/// hash of the source's kind and then of every file.
OpenedPackSource reopen_table_source(const PackSource& source, OpenTableFiles open_files);

}  // namespace thdpack::detail
