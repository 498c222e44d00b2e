// Arrow IPC files and Arrow C streams as datasets (arrow_dataset.hpp), on the Arrow C++ library of
// pyarrow's wheel: the record batches are used where they lie (a memory map, or the producer's
// buffers), and the rows are checked and numbered by the reader Parquet uses (table_dataset.hpp).

#include "thdpack/data/arrow_dataset.hpp"

#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/record_batch.h>

#include <cstring>
#include <mutex>
#include <set>

#include "data/parquet_source.hpp"
#include "data/table_dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/pack_file.hpp"

namespace thdpack {
namespace {

void ok_or_fail(const arrow::Status& status, const std::string& where) {
  if (!status.ok()) fail(where, ": ", status.message());
}

// Record batches in memory: a table's groups.
class BatchesFile final : public detail::TableFile {
 public:
  BatchesFile(std::string path, std::shared_ptr<arrow::Schema> schema,
              std::vector<std::shared_ptr<arrow::RecordBatch>> batches,
              std::shared_ptr<void> keep = nullptr)
      : path_(std::move(path)),
        schema_(std::move(schema)),
        batches_(std::move(batches)),
        keep_(std::move(keep)) {}

  const std::string& path() const override { return path_; }
  std::shared_ptr<arrow::Schema> schema() const override { return schema_; }
  int num_groups() const override { return static_cast<int>(batches_.size()); }
  int64_t group_rows(int g) const override { return batches_[static_cast<size_t>(g)]->num_rows(); }
  std::shared_ptr<arrow::ChunkedArray> read(int g, int field) const override {
    const auto& column = batches_[static_cast<size_t>(g)]->column(field);
    // Offsets past the values, say, of a damaged file: refused before any value is read (once
    // per column of a batch; a sample read later finds it checked). Batches read side by side
    // are checked side by side: the lock only guards the record of what was checked.
    {
      const std::lock_guard lock(mutex_);
      if (validated_.contains({g, field})) return std::make_shared<arrow::ChunkedArray>(column);
    }
    const arrow::Status status = column->ValidateFull();
    if (!status.ok()) {
      fail(path_, ": record batch ", g, ": column \"", schema_->field(field)->name(),
           "\": ", status.message());
    }
    const std::lock_guard lock(mutex_);
    validated_.insert({g, field});
    return std::make_shared<arrow::ChunkedArray>(column);
  }
  const char* group_noun() const override { return "record batch"; }

 private:
  std::string path_;
  std::shared_ptr<arrow::Schema> schema_;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches_;
  std::shared_ptr<void> keep_;  // what the batches point into (the file's lease)
  mutable std::mutex mutex_;
  mutable std::set<std::pair<int, int>> validated_;  // (batch, field) checked by ValidateFull
};

// The same schema in every batch: a stream may not change it, and a dataset reads by field index.
void check_batch_schema(const arrow::RecordBatch& batch, const arrow::Schema& schema,
                        const std::string& path, int64_t index) {
  check(batch.schema()->Equals(schema, false), path, ": record batch ", index,
        " has another schema than the file's");
}

// An Arrow IPC file (the stream format datasets writes, or the file format), memory-mapped: its
// batches point into the map, which lives as long as they do.
std::unique_ptr<detail::TableFile> open_arrow_file(const std::string& path, Hash64* hash) {
  auto lease = std::make_shared<InputLease>(path, "Arrow file");
  const InputFile& file = lease->file();
  const int64_t size = file.size();
  char head[8] = {};
  const size_t got_head = size >= 8 ? file.read_at(0, head, 8) : 0;
  const bool file_format = got_head == 8 && std::memcmp(head, "ARROW1", 6) == 0;
  if (!file_format) {
    // A stream ends with its end-of-stream marker (0xFFFFFFFF, then a zero length): without it
    // the file was cut, perhaps between two batches, where the reader would see a shorter table.
    const unsigned char eos[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    char tail[8] = {};
    check(size >= 8 && file.read_at(size - 8, tail, 8) == 8 && std::memcmp(tail, eos, 8) == 0, path,
          ": not a complete Arrow IPC stream (it does not end with the end-of-stream "
          "marker: truncated, or not an Arrow file)");
  }
  // The map is of the descriptor the lease holds: the very file checked and fingerprinted.
  auto mapped = arrow::io::MemoryMappedFile::Open(
      "/proc/self/fd/" + std::to_string(file.descriptor()), arrow::io::FileMode::READ);
  ok_or_fail(mapped.status(), path + ": cannot be memory-mapped");
  std::shared_ptr<arrow::io::MemoryMappedFile> map = *mapped;
  if (hash != nullptr) {
    hash->update(&size, sizeof(size));
    auto all = map->ReadAt(0, size);
    ok_or_fail(all.status(), path);
    hash->update((*all)->data(), static_cast<size_t>((*all)->size()));
  }
  std::shared_ptr<arrow::Schema> schema;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  const std::string unreadable = path + ": not a readable Arrow file";
  if (file_format) {
    auto reader = arrow::ipc::RecordBatchFileReader::Open(map);
    ok_or_fail(reader.status(), unreadable);
    schema = (*reader)->schema();
    for (int b = 0; b < (*reader)->num_record_batches(); ++b) {
      auto batch = (*reader)->ReadRecordBatch(b);
      ok_or_fail(batch.status(), message(unreadable, " (record batch ", b, ")"));
      check_batch_schema(**batch, *schema, path, b);
      batches.push_back(*batch);
    }
  } else {
    auto reader = arrow::ipc::RecordBatchStreamReader::Open(map);
    ok_or_fail(reader.status(), unreadable);
    schema = (*reader)->schema();
    for (int64_t b = 0;; ++b) {
      std::shared_ptr<arrow::RecordBatch> batch;
      ok_or_fail((*reader)->ReadNext(&batch), message(unreadable, " (record batch ", b, ")"));
      if (!batch) break;
      check_batch_schema(*batch, *schema, path, b);
      batches.push_back(std::move(batch));
    }
  }
  struct Keep {
    std::shared_ptr<InputLease> lease;
    std::shared_ptr<arrow::io::MemoryMappedFile> map;
  };
  return std::make_unique<BatchesFile>(path, schema, std::move(batches),
                                       std::make_shared<Keep>(Keep{lease, map}));
}

std::unique_ptr<Dataset> open_arrow_files(const std::vector<std::string>& paths,
                                          const ParquetOptions& options, Hash64* hash) {
  std::vector<std::unique_ptr<detail::TableFile>> files;
  for (const std::string& path : paths) files.push_back(open_arrow_file(path, hash));
  return detail::make_table_dataset(std::move(files), options, "Arrow files");
}

// Rows of a table in another order, as an indices mapping gives them.
class SelectedRows final : public Dataset {
 public:
  SelectedRows(std::unique_ptr<Dataset> table, std::vector<int64_t> rows, std::string name)
      : table_(std::move(table)), rows_(std::move(rows)), name_(std::move(name)) {}
  int64_t size() const override { return static_cast<int64_t>(rows_.size()); }
  int64_t length(int64_t index) const override { return table_->length(row(index)); }
  Sample sample(int64_t index) const override {
    Sample s = table_->sample(row(index));
    s.id = index;
    return s;
  }
  std::vector<Sample> samples(std::span<const int64_t> indices) const override {
    std::vector<int64_t> rows;
    rows.reserve(indices.size());
    for (const int64_t index : indices) rows.push_back(row(index));
    std::vector<Sample> out = table_->samples(rows);
    for (size_t k = 0; k < out.size(); ++k) out[k].id = indices[k];
    return out;
  }
  std::string describe() const override {
    return message(name_, ": ", size(), " rows selected from ", table_->describe());
  }
  std::string locate(int64_t index) const override { return table_->locate(row(index)); }

 private:
  int64_t row(int64_t index) const {
    check(index >= 0 && index < size(), "sample index ", index, " outside [0, ", size(),
          ") of the dataset");
    return rows_[static_cast<size_t>(index)];
  }
  std::unique_ptr<Dataset> table_;
  std::vector<int64_t> rows_;
  std::string name_;
};

OpenedPackSource open_arrow_source(const PackSource& source) {
  return detail::reopen_table_source(source, &open_arrow_files);
}

}  // namespace

std::unique_ptr<Dataset> load_arrow_dataset(const std::vector<std::string>& paths,
                                            const ParquetOptions& options) {
  return open_arrow_files(expand_arrow_paths(paths), options, nullptr);
}

std::unique_ptr<Dataset> load_arrow_stream_dataset(ArrowArrayStream* stream,
                                                   const ParquetOptions& options,
                                                   const std::string& name) {
  check(stream != nullptr && stream->release != nullptr, name,
        ": not an Arrow C stream (none, or one already released)");
  auto reader = arrow::ImportRecordBatchReader(stream);
  ok_or_fail(reader.status(), name + ": not a readable Arrow stream");
  std::shared_ptr<arrow::Schema> schema = (*reader)->schema();
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (int64_t b = 0;; ++b) {
    std::shared_ptr<arrow::RecordBatch> batch;
    ok_or_fail((*reader)->ReadNext(&batch), message(name, ": record batch ", b));
    if (!batch) break;
    check_batch_schema(*batch, *schema, name, b);
    batches.push_back(std::move(batch));
  }
  std::vector<std::unique_ptr<detail::TableFile>> files;
  files.push_back(std::make_unique<BatchesFile>(name, schema, std::move(batches)));
  return detail::make_table_dataset(std::move(files), options, "Arrow table");
}

std::unique_ptr<Dataset> select_rows(std::unique_ptr<Dataset> table, std::vector<int64_t> rows,
                                     const std::string& name) {
  check(!rows.empty(), name, ": its indices mapping selects no row");
  const int64_t n = table->size();
  for (size_t i = 0; i < rows.size(); ++i) {
    check(rows[i] >= 0 && rows[i] < n, name, ": indices mapping entry ", i, " is row ", rows[i],
          ", outside the table's ", n, " rows");
  }
  return std::make_unique<SelectedRows>(std::move(table), std::move(rows), name);
}

void register_arrow_pack_source() {
  register_pack_source_kind("arrow", open_arrow_source);
}

}  // namespace thdpack
