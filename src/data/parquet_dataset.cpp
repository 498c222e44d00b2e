// The Parquet reader (parquet_dataset.hpp), on the Arrow and Parquet C++ libraries of pyarrow's
// wheel.

#include "thdpack/data/parquet_dataset.hpp"

#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>

#include "data/parquet_columns.hpp"
#include "data/parquet_source.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/pack_file.hpp"

namespace thdpack {
namespace {

using detail::ParquetColumnRole;
using detail::ParquetListColumn;

// A column the dataset reads: tokens first, then the loss mask or the labels.
struct ColumnChoice {
  std::string name;
  ParquetColumnRole role;
};

// One file of the dataset, open (and leased as an input in use) for the dataset's life.
struct Shard {
  std::unique_ptr<InputLease> lease;
  std::unique_ptr<parquet::arrow::FileReader> reader;
  std::vector<int> fields;               // per ColumnChoice, its field in the file
  std::vector<int64_t> group_first_row;  // per row group, its first row in the file
};

// A non-empty row group, where its rows are in the dataset.
struct Group {
  size_t shard = 0;
  int group = 0;
  int64_t first_sample = 0;
};

// Arrow reports through Status and, from the Parquet layer, exceptions: both become one line.
template <class F>
auto arrow_call(const std::function<std::string()>& where, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(where(), ": ", e.what());
  }
}

void ok_or_fail(const arrow::Status& status, const std::function<std::string()>& where) {
  if (!status.ok()) fail(where(), ": ", status.message());
}

// The file's size and footer (the Parquet metadata and its length and magic): what a pack file's
// fingerprint of this file is made of.
void hash_size_and_footer(const InputFile& file, Hash64& hash) {
  const int64_t size = file.size();
  hash.update(&size, sizeof(size));
  char tail[8] = {};
  if (size < 8 || file.read_at(size - 8, tail, 8) != 8) return;  // the reader refuses it
  uint32_t length = 0;
  std::memcpy(&length, tail, 4);
  const int64_t footer = static_cast<int64_t>(length) + 8;
  if (footer > size) return;
  std::string bytes(static_cast<size_t>(footer), '\0');
  const size_t got = file.read_at(size - footer, bytes.data(), bytes.size());
  hash.update(bytes.data(), got);
}

Shard open_shard(const std::string& path, const std::vector<ColumnChoice>& columns) {
  Shard s;
  s.lease = std::make_unique<InputLease>(path, "Parquet file");
  const auto where = [&] { return path; };
  // Arrow reads through its own descriptor, a duplicate of the one opened: the same file.
  const int fd = ::dup(s.lease->file().descriptor());
  check(fd >= 0, path, ": cannot duplicate its descriptor");
  auto file = arrow::io::ReadableFile::Open(fd);
  if (!file.ok()) ::close(fd);
  ok_or_fail(file.status(), where);
  auto reader = arrow_call(
      where, [&] { return parquet::arrow::OpenFile(*file, arrow::default_memory_pool()); });
  ok_or_fail(reader.status(), [&] { return path + ": not a readable Parquet file"; });
  s.reader = std::move(*reader);
  std::shared_ptr<arrow::Schema> schema;
  ok_or_fail(arrow_call(where, [&] { return s.reader->GetSchema(&schema); }), where);
  for (const ColumnChoice& c : columns) {
    const int field = schema->GetFieldIndex(c.name);
    if (field < 0) {
      std::string names;
      for (const auto& f : schema->fields()) names += (names.empty() ? "" : ", ") + f->name();
      fail(path, ": no column \"", c.name, "\" (or more than one); its columns are ", names);
    }
    detail::check_list_type(*schema->field(field)->type(), c.role, c.name, path);
    s.fields.push_back(field);
  }
  const auto metadata = s.reader->parquet_reader()->metadata();
  int64_t row = 0;
  for (int g = 0; g < metadata->num_row_groups(); ++g) {
    s.group_first_row.push_back(row);
    row += metadata->RowGroup(g)->num_rows();
  }
  return s;
}

std::vector<std::string> column_types(const Shard& s) {
  std::shared_ptr<arrow::Schema> schema;
  ok_or_fail(s.reader->GetSchema(&schema), [] { return std::string("schema"); });
  std::vector<std::string> out;
  for (const int field : s.fields)
    out.push_back(detail::list_type_text(*schema->field(field)->type()));
  return out;
}

std::vector<ParquetListColumn> read_group(const Shard& s, int g,
                                          const std::vector<ColumnChoice>& columns) {
  std::vector<ParquetListColumn> out;
  const int64_t rows = s.reader->parquet_reader()->metadata()->RowGroup(g)->num_rows();
  for (size_t c = 0; c < columns.size(); ++c) {
    const auto where = [&] {
      return message(s.lease->file().path(), ": row group ", g, ": column \"", columns[c].name,
                     "\"");
    };
    std::shared_ptr<arrow::ChunkedArray> data;
    ok_or_fail(
        arrow_call(where, [&] { return s.reader->RowGroup(g)->Column(s.fields[c])->Read(&data); }),
        where);
    check(data->length() == rows, where(), ": holds ", data->length(), " rows, its metadata says ",
          rows);
    out.emplace_back(std::move(data), columns[c].role, columns[c].name);
  }
  return out;
}

// Row `row` of a row group as sample `id`; the checks of a JSONL line.
Sample make_sample(const std::vector<ParquetListColumn>& data,
                   const std::vector<ColumnChoice>& columns, int64_t row, int64_t id,
                   bool labels_shifted, const std::function<std::string()>& where) {
  Sample s;
  s.id = id;
  s.labels_shifted = labels_shifted;
  data[0].integers(row, s.input_ids, where);
  if (s.input_ids.empty()) {
    fail(where(), ": \"", columns[0].name, "\" is empty: a sample needs at least one token");
  }
  if (data.size() > 1) {
    size_t got = 0;
    if (columns[1].role == ParquetColumnRole::kLossMask) {
      data[1].mask(row, s.loss_mask, where);
      got = s.loss_mask.size();
    } else {
      data[1].integers(row, s.labels, where);
      got = s.labels.size();
    }
    if (got != s.input_ids.size()) {  // where() is built only for the message
      fail(where(), ": \"", columns[1].name, "\" has ", got, " entries but \"", columns[0].name,
           "\" has ", s.input_ids.size());
    }
  }
  return s;
}

class ParquetDataset final : public Dataset {
 public:
  ParquetDataset(const std::vector<std::string>& files, const ParquetOptions& options, Hash64* hash)
      : options_(options) {
    columns_.push_back({options.tokens_column, ParquetColumnRole::kTokens});
    check(options.loss_mask_column.empty() || options.labels_column.empty(),
          "give either a loss-mask column or a labels column, not both");
    if (!options.loss_mask_column.empty()) {
      columns_.push_back({options.loss_mask_column, ParquetColumnRole::kLossMask});
    }
    if (!options.labels_column.empty()) {
      columns_.push_back({options.labels_column, ParquetColumnRole::kLabels});
    }
    std::vector<std::string> types;
    for (const std::string& path : files) {
      shards_.push_back(open_shard(path, columns_));
      if (hash != nullptr) hash_size_and_footer(shards_.back().lease->file(), *hash);
      check_same_types(types);
      scan(shards_.size() - 1);
    }
    check(!lengths_.empty(), "the Parquet files (", files.front(),
          files.size() > 1 ? message(" and ", files.size() - 1, " more") : "", ") hold no rows");
    files_ = files;
  }

  int64_t size() const override { return static_cast<int64_t>(lengths_.size()); }
  int64_t length(int64_t index) const override {
    check_index(index);
    return lengths_[static_cast<size_t>(index)];
  }
  Sample sample(int64_t index) const override {
    check_index(index);
    const size_t gi = group_of(index);
    const Group& g = groups_[gi];
    const std::lock_guard lock(mutex_);
    const auto& data = cached(gi);
    const int64_t row = index - g.first_sample;
    return make_sample(data, columns_, row, index, options_.labels_shifted,
                       [&] { return where(g, row); });
  }
  std::string describe() const override {
    return message("parquet ", files_.front(),
                   files_.size() > 1 ? message(" and ", files_.size() - 1, " more files") : "",
                   " (", size(), " samples)");
  }
  std::string locate(int64_t index) const override {
    check_index(index);
    const Group& g = groups_[group_of(index)];
    return where(g, index - g.first_sample);
  }

 private:
  void check_index(int64_t index) const {
    check(index >= 0 && index < size(), "sample index ", index, " outside [0, ", size(),
          ") of the Parquet dataset");
  }

  // Every file's columns have the first file's types (list kind and value type).
  void check_same_types(std::vector<std::string>& first) const {
    const std::vector<std::string> now = column_types(shards_.back());
    if (first.empty()) {
      first = now;
      return;
    }
    for (size_t c = 0; c < now.size(); ++c) {
      check(now[c] == first[c], shards_.back().lease->file().path(), ": column \"",
            columns_[c].name, "\" is ", now[c], " but it is ", first[c], " in ",
            shards_.front().lease->file().path(), "; every file of a dataset needs the same types");
    }
  }

  // Reads shard s row group by row group: checks every row and keeps its length.
  void scan(size_t s) {
    const Shard& shard = shards_[s];
    for (int g = 0; g < static_cast<int>(shard.group_first_row.size()); ++g) {
      const std::vector<ParquetListColumn> data = read_group(shard, g, columns_);
      if (data[0].rows() == 0) continue;  // an empty row group is no error
      const Group group{s, g, size()};
      for (int64_t row = 0; row < data[0].rows(); ++row) {
        const Sample x = make_sample(data, columns_, row, size(), options_.labels_shifted,
                                     [&] { return where(group, row); });
        lengths_.push_back(static_cast<int64_t>(x.input_ids.size()));
      }
      groups_.push_back(group);
    }
  }

  std::string where(const Group& g, int64_t row) const {
    const Shard& s = shards_[g.shard];
    return message(s.lease->file().path(), ": row group ", g.group, ", row ",
                   s.group_first_row[static_cast<size_t>(g.group)] + row);
  }

  size_t group_of(int64_t index) const {
    const auto after =
        std::upper_bound(groups_.begin(), groups_.end(), index,
                         [](int64_t i, const Group& g) { return i < g.first_sample; });
    return static_cast<size_t>(after - groups_.begin() - 1);
  }

  // The last few row groups read, newest first: samples are mostly asked for in order.
  const std::vector<ParquetListColumn>& cached(size_t gi) const {
    for (const auto& [key, data] : cache_) {
      if (key == gi) return data;
    }
    if (cache_.size() >= kCachedGroups) cache_.pop_back();
    cache_.emplace_front(gi, read_group(shards_[groups_[gi].shard], groups_[gi].group, columns_));
    return cache_.front().second;
  }

  static constexpr size_t kCachedGroups = 2;
  ParquetOptions options_;
  std::vector<ColumnChoice> columns_;
  std::vector<std::string> files_;
  std::vector<Shard> shards_;
  std::vector<Group> groups_;
  std::vector<int64_t> lengths_;
  mutable std::mutex mutex_;
  mutable std::deque<std::pair<size_t, std::vector<ParquetListColumn>>> cache_;
};

OpenedPackSource open_parquet_source(const PackSource& source) {
  const detail::ParquetSourceSpec spec = detail::parse_parquet_source_spec(source.spec);
  Hash64 hash;
  hash.update(source.kind.data(), source.kind.size());
  OpenedPackSource out;
  out.dataset = std::make_unique<ParquetDataset>(spec.files, spec.options, &hash);
  out.fingerprint = hash.digest();
  return out;
}

}  // namespace

bool parquet_supported() {
  return true;
}

std::unique_ptr<Dataset> load_parquet_dataset(const std::vector<std::string>& paths,
                                              const ParquetOptions& options) {
  return std::make_unique<ParquetDataset>(expand_parquet_paths(paths), options, nullptr);
}

void register_parquet_pack_source() {
  register_pack_source_kind("parquet", open_parquet_source);
}

}  // namespace thdpack
