#pragma once
// A Parquet pack source's spec (parquet_source_spec) read back.

#include <string>
#include <vector>

#include "thdpack/data/parquet_dataset.hpp"

namespace thdpack::detail {

struct ParquetSourceSpec {
  std::vector<std::string> files;  ///< absolute, in dataset order
  ParquetOptions options;
};

/// The files and options parquet_source_spec wrote; InvalidArgument when `spec` is not such JSON.
ParquetSourceSpec parse_parquet_source_spec(const std::string& spec);

}  // namespace thdpack::detail
