#pragma once
// One dataset over Arrow tables, whatever holds them: Parquet files (read row group by row group),
// Arrow IPC files of Hugging Face datasets (memory-mapped record batches) or an Arrow C stream
// (record batches in memory). Each holder is a TableFile of groups of rows; the dataset checks and
// numbers the rows the same way for all of them (parquet_dataset.hpp, arrow_dataset.hpp).

#include <arrow/chunked_array.h>
#include <arrow/type.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/data/parquet_dataset.hpp"

namespace thdpack::detail {

/// A file (or stream) of a dataset: its schema and its rows in groups (row groups, record
/// batches).
class TableFile {
 public:
  virtual ~TableFile() = default;
  /// The file's path (or a name of the stream) for messages.
  virtual const std::string& path() const = 0;
  virtual std::shared_ptr<arrow::Schema> schema() const = 0;
  virtual int num_groups() const = 0;
  /// Rows of group `g` (the file's own count: Parquet metadata, the batch's length).
  virtual int64_t group_rows(int g) const = 0;
  /// Column `field` of group `g`; throws InvalidArgument naming the file when it cannot be read.
  virtual std::shared_ptr<arrow::ChunkedArray> read(int g, int field) const = 0;
  /// What a group is called in messages: "row group", "record batch".
  virtual const char* group_noun() const = 0;

  /// Some columns of some consecutive rows of a group, in the order asked for.
  using Slice = std::vector<std::shared_ptr<arrow::ChunkedArray>>;
  /// Columns `fields` of group `g` in slices of consecutive rows, each handed to `each` with its
  /// first row in the group before the next slice is read, so that a reader going through the
  /// rows once holds one slice at a time. Throws as read() does. This default hands over the
  /// whole group as one slice.
  virtual void read_slices(int g, const std::vector<int>& fields,
                           const std::function<void(int64_t first_row, Slice)>& each) const {
    Slice whole;
    for (const int field : fields) whole.push_back(read(g, field));
    each(0, std::move(whole));
  }
};

/// The dataset of the rows of `files` in order (sample ids as load_parquet_dataset numbers them);
/// `what` names the kind of input in messages ("Parquet files", "Arrow files").
std::unique_ptr<Dataset> make_table_dataset(std::vector<std::unique_ptr<TableFile>> files,
                                            const ParquetOptions& options, const std::string& what);

}  // namespace thdpack::detail
