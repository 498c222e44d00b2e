#pragma once
// Small Parquet files for the reader's tests, written with the Arrow C++ writer: list columns of
// any value type (rows given as int64 or double, converted to the column's type), nulls where
// asked, and row groups of any sizes, empty ones included.

#include <arrow/builder.h>
#include <arrow/io/file.h>
#include <arrow/table.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace thdpack::test_util {

/// A row of a list column: nullopt is a null list; a null value is given by `null_at`.
struct ListRow {
  std::optional<std::vector<double>> values = std::vector<double>{};
  int64_t null_at = -1;  ///< position of a null value inside the list, or -1
};

inline std::vector<ListRow> rows_of(const std::vector<std::vector<int64_t>>& lists) {
  std::vector<ListRow> out;
  for (const auto& l : lists) out.push_back({std::vector<double>(l.begin(), l.end())});
  return out;
}

inline void ok(const arrow::Status& status) {
  if (!status.ok()) throw std::runtime_error(status.ToString());
}

template <class Builder, class C>
void append_values(Builder& b, const ListRow& row) {
  for (size_t k = 0; k < row.values->size(); ++k) {
    if (static_cast<int64_t>(k) == row.null_at) {
      ok(b.AppendNull());
    } else {
      ok(b.Append(static_cast<C>((*row.values)[k])));
    }
  }
}

/// A list (or large_list) array of `value_type` holding `rows`.
inline std::shared_ptr<arrow::Array> list_array(const std::vector<ListRow>& rows,
                                                const std::shared_ptr<arrow::DataType>& value_type,
                                                bool large = false) {
  std::unique_ptr<arrow::ArrayBuilder> values;
  ok(arrow::MakeBuilder(value_type).Value(&values));
  std::shared_ptr<arrow::ArrayBuilder> shared(std::move(values));
  std::unique_ptr<arrow::ArrayBuilder> list;
  if (large) {
    list = std::make_unique<arrow::LargeListBuilder>(arrow::default_memory_pool(), shared);
  } else {
    list = std::make_unique<arrow::ListBuilder>(arrow::default_memory_pool(), shared);
  }
  for (const ListRow& row : rows) {
    if (!row.values) {
      ok(list->AppendNull());
      continue;
    }
    ok(large ? static_cast<arrow::LargeListBuilder&>(*list).Append()
             : static_cast<arrow::ListBuilder&>(*list).Append());
    switch (value_type->id()) {
#define THDPACK_APPEND(ID, T)                                         \
  case arrow::Type::ID:                                               \
    append_values<arrow::NumericBuilder<arrow::T>, arrow::T::c_type>( \
        static_cast<arrow::NumericBuilder<arrow::T>&>(*shared), row); \
    break;
      THDPACK_APPEND(INT8, Int8Type)
      THDPACK_APPEND(INT16, Int16Type)
      THDPACK_APPEND(INT32, Int32Type)
      THDPACK_APPEND(INT64, Int64Type)
      THDPACK_APPEND(UINT8, UInt8Type)
      THDPACK_APPEND(UINT16, UInt16Type)
      THDPACK_APPEND(UINT32, UInt32Type)
      THDPACK_APPEND(UINT64, UInt64Type)
      THDPACK_APPEND(FLOAT, FloatType)
      THDPACK_APPEND(DOUBLE, DoubleType)
#undef THDPACK_APPEND
      case arrow::Type::BOOL:
        append_values<arrow::BooleanBuilder, bool>(static_cast<arrow::BooleanBuilder&>(*shared),
                                                   row);
        break;
      case arrow::Type::STRING:
        for (double v : *row.values) {
          ok(static_cast<arrow::StringBuilder&>(*shared).Append(std::to_string(v)));
        }
        break;
      default:
        throw std::runtime_error("list_array: unsupported value type");
    }
  }
  std::shared_ptr<arrow::Array> out;
  ok(list->Finish(&out));
  return out;
}

/// A named column of a file.
struct TestColumn {
  std::string name;
  std::shared_ptr<arrow::Array> data;
};

/// Writes `columns` (all of one length) to `path` as row groups of `group_rows` rows each (their
/// sum is the length; 0 makes an empty row group).
inline void write_parquet(const std::string& path, const std::vector<TestColumn>& columns,
                          const std::vector<int64_t>& group_rows) {
  arrow::FieldVector fields;
  for (const auto& c : columns) fields.push_back(arrow::field(c.name, c.data->type()));
  const auto schema = arrow::schema(fields);
  std::shared_ptr<arrow::io::FileOutputStream> sink;
  ok(arrow::io::FileOutputStream::Open(path).Value(&sink));
  std::unique_ptr<parquet::arrow::FileWriter> writer;
  ok(parquet::arrow::FileWriter::Open(*schema, arrow::default_memory_pool(), sink).Value(&writer));
  int64_t at = 0;
  for (const int64_t n : group_rows) {
    ok(writer->NewRowGroup());
    for (const auto& c : columns) ok(writer->WriteColumnChunk(*c.data->Slice(at, n)));
    at += n;
  }
  ok(writer->Close());
  ok(sink->Close());
}

/// One row group holding everything.
inline void write_parquet(const std::string& path, const std::vector<TestColumn>& columns) {
  write_parquet(path, columns, {columns.front().data->length()});
}

}  // namespace thdpack::test_util
