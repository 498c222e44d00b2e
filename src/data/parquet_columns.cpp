#include "data/parquet_columns.hpp"

#include <arrow/util/byte_size.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "thdpack/core/errors.hpp"

namespace thdpack::detail {
namespace {

constexpr int64_t kIgnoreLabel = -100;  // Hugging Face / PyTorch ignore_index

bool role_accepts(ParquetColumnRole role, arrow::Type::type id) {
  if (arrow::is_integer(id)) return true;
  return role == ParquetColumnRole::kLossMask &&
         (id == arrow::Type::BOOL || id == arrow::Type::FLOAT || id == arrow::Type::DOUBLE);
}

const char* expected_text(ParquetColumnRole role) {
  switch (role) {
    case ParquetColumnRole::kTokens:
      return "a list of integer token ids (list or large_list of int8..int64 or uint8..uint64)";
    case ParquetColumnRole::kLossMask:
      return "a list of 0/1 values (list or large_list of integers, booleans or floats)";
    case ParquetColumnRole::kLabels:
      return "a list of integer labels (list or large_list of int8..int64 or uint8..uint64)";
    case ParquetColumnRole::kStarts:
      return "a list of integer sample starts (list or large_list of int8..int64 or "
             "uint8..uint64)";
  }
  return "";
}

// Calls fn(position in the row, value) for values [begin, end) of `values`, typed as stored.
template <class Fn>
void visit_values(const arrow::Array& values, int64_t begin, int64_t end, Fn&& fn) {
  const auto each = [&]<class A>(const A& typed) {
    for (int64_t k = begin; k < end; ++k) fn(static_cast<size_t>(k - begin), typed.Value(k));
  };
  switch (values.type_id()) {
    case arrow::Type::INT8:
      return each(static_cast<const arrow::Int8Array&>(values));
    case arrow::Type::INT16:
      return each(static_cast<const arrow::Int16Array&>(values));
    case arrow::Type::INT32:
      return each(static_cast<const arrow::Int32Array&>(values));
    case arrow::Type::INT64:
      return each(static_cast<const arrow::Int64Array&>(values));
    case arrow::Type::UINT8:
      return each(static_cast<const arrow::UInt8Array&>(values));
    case arrow::Type::UINT16:
      return each(static_cast<const arrow::UInt16Array&>(values));
    case arrow::Type::UINT32:
      return each(static_cast<const arrow::UInt32Array&>(values));
    case arrow::Type::UINT64:
      return each(static_cast<const arrow::UInt64Array&>(values));
    case arrow::Type::BOOL:
      return each(static_cast<const arrow::BooleanArray&>(values));
    case arrow::Type::FLOAT:
      return each(static_cast<const arrow::FloatArray&>(values));
    case arrow::Type::DOUBLE:
      return each(static_cast<const arrow::DoubleArray&>(values));
    default:
      fail<InternalError>("unchecked Parquet value type ", values.type()->ToString());
  }
}

// Whether values [begin, end) of a list column's child are all what `role` allows.
bool values_allowed(const arrow::Array& values, int64_t begin, int64_t end,
                    ParquetColumnRole role) {
  bool bad = false;
  visit_values(values, begin, end, [&](size_t, auto v) {
    using V = decltype(v);
    if (role == ParquetColumnRole::kLossMask) {
      bad |= !(v == 0 || v == 1);
    } else if constexpr (std::is_unsigned_v<V> && sizeof(V) == 8) {
      bad |= v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    } else {
      const auto x = static_cast<int64_t>(v);
      bad |= x < 0 && !(role == ParquetColumnRole::kLabels && x == kIgnoreLabel);
    }
  });
  return !bad;
}

// Appends the lengths of the rows of `list` (a ListArray or LargeListArray) when no row is null
// and no value is null or refused.
template <class List>
bool list_lengths_if_valid(const List& list, ParquetColumnRole role, std::vector<int64_t>& out) {
  const int64_t rows = list.length();
  if (rows == 0) return true;
  if (list.null_count() > 0 || list.values()->null_count() > 0) return false;
  if (!values_allowed(*list.values(), list.value_offset(0), list.value_offset(rows), role)) {
    return false;
  }
  for (int64_t r = 0; r < rows; ++r) out.push_back(list.value_length(r));
  return true;
}

}  // namespace

std::string list_type_text(const arrow::DataType& type) {
  const bool list = type.id() == arrow::Type::LIST || type.id() == arrow::Type::LARGE_LIST;
  if (!list) return type.ToString();
  const auto& value_type = *static_cast<const arrow::BaseListType&>(type).value_type();
  return (type.id() == arrow::Type::LIST ? "list<" : "large_list<") + value_type.ToString() + ">";
}

void check_list_type(const arrow::DataType& type, ParquetColumnRole role, const std::string& name,
                     const std::string& where) {
  const bool list = type.id() == arrow::Type::LIST || type.id() == arrow::Type::LARGE_LIST;
  if (!list ||
      !role_accepts(role, static_cast<const arrow::BaseListType&>(type).value_type()->id())) {
    fail(where, ": column \"", name, "\" is ", list_type_text(type), "; expected ",
         expected_text(role));
  }
}

ParquetListColumn::ParquetListColumn(std::shared_ptr<arrow::ChunkedArray> data,
                                     ParquetColumnRole role, std::string name)
    : data_(std::move(data)), role_(role), name_(std::move(name)) {
  int64_t at = 0;
  for (const auto& chunk : data_->chunks()) {
    chunk_starts_.push_back(at);
    at += chunk->length();
  }
}

ParquetListColumn::Span ParquetListColumn::span(int64_t row,
                                                const std::function<std::string()>& where,
                                                RowPart part) const {
  const auto after = std::upper_bound(chunk_starts_.begin(), chunk_starts_.end(), row);
  const auto c = static_cast<size_t>(after - chunk_starts_.begin() - 1);
  const arrow::Array& chunk = *data_->chunk(static_cast<int>(c));
  const int64_t r = row - chunk_starts_[c];
  if (chunk.IsNull(r)) fail(where(), ": \"", name_, "\" is null; every row needs a list");
  Span s;
  if (chunk.type_id() == arrow::Type::LIST) {
    const auto& list = static_cast<const arrow::ListArray&>(chunk);
    s = {list.values().get(), list.value_offset(r), list.value_offset(r) + list.value_length(r)};
  } else {
    const auto& list = static_cast<const arrow::LargeListArray&>(chunk);
    s = {list.values().get(), list.value_offset(r), list.value_offset(r) + list.value_length(r)};
  }
  const int64_t length = s.end - s.begin;
  const int64_t end = part.end < 0 ? length : part.end;
  check<InternalError>(0 <= part.begin && part.begin <= end && end <= length, "values [",
                       part.begin, ", ", end, ") of a row of ", length);
  s = {s.values, s.begin + part.begin, s.begin + end, part.begin};
  if (s.values->null_count() > 0) {
    for (int64_t k = s.begin; k < s.end; ++k) {
      if (s.values->IsNull(k)) {
        fail(where(), ": \"", name_, "\"[", s.first + k - s.begin,
             "] is null; lists may not hold nulls");
      }
    }
  }
  return s;
}

void ParquetListColumn::integers(int64_t row, std::vector<int64_t>& out,
                                 const std::function<std::string()>& where, RowPart part) const {
  const Span s = span(row, where, part);
  out.resize(static_cast<size_t>(s.end - s.begin));
  const bool labels = role_ == ParquetColumnRole::kLabels;
  visit_values(*s.values, s.begin, s.end, [&](size_t k, auto v) {
    using V = decltype(v);
    if constexpr (std::is_unsigned_v<V> && sizeof(V) == 8) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(where(), ": \"", name_, "\"[", s.first + static_cast<int64_t>(k), "] = ", v,
             " is out of range (token ids must fit int64)");
      }
    }
    const auto x = static_cast<int64_t>(v);
    if (x < 0 && !(labels && x == kIgnoreLabel)) {
      fail(where(), ": \"", name_, "\"[", s.first + static_cast<int64_t>(k), "] = ", x,
           " is below the smallest allowed value 0",
           labels ? " (the only other value allowed is -100, the ignore id)" : "");
    }
    out[k] = x;
  });
}

int64_t ParquetListColumn::checked_length(int64_t row,
                                          const std::function<std::string()>& where) const {
  const Span s = span(row, where);
  if (!values_allowed(
          *s.values, s.begin, s.end,
          role_)) {  // the copying reader names the first bad value, as it does when reading
    if (role_ == ParquetColumnRole::kLossMask) {
      std::vector<float> values;
      mask(row, values, where);
    } else {
      std::vector<int64_t> values;
      integers(row, values, where);
    }
  }
  return s.end - s.begin;
}

void ParquetListColumn::mask(int64_t row, std::vector<float>& out,
                             const std::function<std::string()>& where, RowPart part) const {
  const Span s = span(row, where, part);
  out.resize(static_cast<size_t>(s.end - s.begin));
  visit_values(*s.values, s.begin, s.end, [&](size_t k, auto v) {
    if (!(v == 0 || v == 1)) {
      fail(where(), ": \"", name_, "\"[", s.first + static_cast<int64_t>(k),
           "] must be 0 or 1, got ", +v);
    }
    out[k] = v ? 1.0f : 0.0f;
  });
}

bool ParquetListColumn::lengths_if_valid(std::vector<int64_t>& out) const {
  const size_t before = out.size();
  for (const auto& chunk : data_->chunks()) {
    const bool fine =
        chunk->type_id() == arrow::Type::LIST
            ? list_lengths_if_valid(static_cast<const arrow::ListArray&>(*chunk), role_, out)
            : list_lengths_if_valid(static_cast<const arrow::LargeListArray&>(*chunk), role_, out);
    if (!fine) {
      out.resize(before);
      return false;
    }
  }
  return true;
}

int64_t ParquetListColumn::bytes() const {
  return arrow::util::TotalBufferSize(*data_);
}

}  // namespace thdpack::detail
