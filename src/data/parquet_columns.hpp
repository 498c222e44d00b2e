#pragma once
// One list column of one Parquet row group, as Arrow read it, turned into a sample's values with
// the checks the JSONL reader makes (parquet_dataset.hpp).

#include <arrow/array.h>
#include <arrow/chunked_array.h>
#include <arrow/type.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace thdpack::detail {

/// What a column holds, which decides the value types and values it may have.
enum class ParquetColumnRole {
  kTokens,    ///< integers in [0, 2^63)
  kLossMask,  ///< integers, booleans or floats, each 0 or 1
  kLabels,    ///< integers >= 0, or -100 (the ignore id)
  kStarts,    ///< integers >= 0: where the samples of a packed row start
};

/// "list<int32>": the column's kind of list and value type, without field names or nullability,
/// so that files written by different tools compare equal when their values do.
std::string list_type_text(const arrow::DataType& type);

/// InvalidArgument "`where`: column "NAME" is TYPE; expected ..." unless `type` is a list or
/// large_list of values that `role` accepts.
void check_list_type(const arrow::DataType& type, ParquetColumnRole role, const std::string& name,
                     const std::string& where);

/// Which values of a row: [begin, end), or from begin to the row's end when end is negative.
struct RowPart {
  int64_t begin = 0;
  int64_t end = -1;
};

/// The rows of one column of a row group (a ChunkedArray of list or large_list whose type passed
/// check_list_type).
class ParquetListColumn {
 public:
  ParquetListColumn(std::shared_ptr<arrow::ChunkedArray> data, ParquetColumnRole role,
                    std::string name);
  int64_t rows() const { return data_->length(); }
  /// Bytes of memory the column's buffers hold.
  int64_t bytes() const;
  /// Row `row`'s values (`part` of them), checked; `where` ("FILE: row group G, row R") starts
  /// every error: a null list, a null value, a value `role` does not allow.
  void integers(int64_t row, std::vector<int64_t>& out, const std::function<std::string()>& where,
                RowPart part = {}) const;
  void mask(int64_t row, std::vector<float>& out, const std::function<std::string()>& where,
            RowPart part = {}) const;
  /// Row `row`'s length, after the checks integers() or mask() (by role) make, with the same
  /// errors, but without copying the values out.
  int64_t checked_length(int64_t row, const std::function<std::string()>& where) const;
  /// When every row passes those checks, appends every row's length to `out` and returns true;
  /// otherwise returns false, leaving `out` as it was (checked_length then names the first error).
  /// Checks the values of a whole chunk at once, without looking up rows one by one.
  bool lengths_if_valid(std::vector<int64_t>& out) const;

 private:
  struct Span {
    const arrow::Array* values = nullptr;  ///< the list's child array
    int64_t begin = 0, end = 0;            ///< the row's values (the part asked for) in it
    int64_t first = 0;                     ///< the index in the row of the value at begin
  };
  Span span(int64_t row, const std::function<std::string()>& where, RowPart part = {}) const;

  std::shared_ptr<arrow::ChunkedArray> data_;
  std::vector<int64_t> chunk_starts_;  ///< first row of each chunk
  ParquetColumnRole role_;
  std::string name_;
};

}  // namespace thdpack::detail
