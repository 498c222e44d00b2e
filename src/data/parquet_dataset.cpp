// The Parquet reader (parquet_dataset.hpp), on the Arrow and Parquet C++ libraries of pyarrow's
// wheel.

#include "thdpack/data/parquet_dataset.hpp"

#include <arrow/io/file.h>
#include <arrow/record_batch.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>

#include "core/ordered_parallel.hpp"
#include "data/parquet_columns.hpp"
#include "data/parquet_source.hpp"
#include "data/table_dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/pack_file.hpp"

namespace thdpack {
namespace {

using detail::ParquetColumnRole;
using detail::ParquetListColumn;
// The columns of one group (tokens, then the loss mask or labels, then the sample starts).
using GroupColumns = std::vector<ParquetListColumn>;

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

// One Parquet file of a dataset, open (and leased as an input in use) for the dataset's life.
// read() may be called from several threads at once: each call borrows a reader of its own (all
// share the file's descriptor, read with pread, and its parsed metadata).
class ParquetFile final : public detail::TableFile {
 public:
  explicit ParquetFile(const std::string& path)
      : lease_(std::make_unique<InputLease>(path, "Parquet file")) {
    const auto where = [&] { return path; };
    // Arrow reads through its own descriptor, a duplicate of the one opened: the same file.
    const int fd = ::dup(lease_->file().descriptor());
    check(fd >= 0, path, ": cannot duplicate its descriptor");
    auto file = arrow::io::ReadableFile::Open(fd);
    if (!file.ok()) ::close(fd);
    ok_or_fail(file.status(), where);
    source_ = *file;
    const auto unreadable = [&] { return path + ": not a readable Parquet file"; };
    auto reader = arrow_call(unreadable, [&] { return make_reader(nullptr); });
    ok_or_fail(reader.status(), unreadable);
    std::unique_ptr<parquet::arrow::FileReader> first = std::move(*reader);
    metadata_ = first->parquet_reader()->metadata();
    ok_or_fail(arrow_call(where, [&] { return first->GetSchema(&schema_); }), where);
    idle_.push_back(std::move(first));
  }

  const InputFile& file() const { return lease_->file(); }
  const std::string& path() const override { return lease_->file().path(); }
  std::shared_ptr<arrow::Schema> schema() const override { return schema_; }
  int num_groups() const override { return metadata_->num_row_groups(); }
  int64_t group_rows(int g) const override { return metadata_->RowGroup(g)->num_rows(); }
  std::shared_ptr<arrow::ChunkedArray> read(int g, int field) const override {
    const auto where = [&] {
      return message(path(), ": row group ", g, ": column \"", schema_->field(field)->name(), "\"");
    };
    Borrowed reader(*this);
    std::shared_ptr<arrow::ChunkedArray> data;
    ok_or_fail(arrow_call(where, [&] { return reader->RowGroup(g)->Column(field)->Read(&data); }),
               where);
    return data;
  }
  const char* group_noun() const override { return "row group"; }
  void read_slices(int g, const std::vector<int>& fields,
                   const std::function<void(int64_t, Slice)>& each) const override {
    const auto where = [&] { return message(path(), ": row group ", g); };
    Borrowed reader(*this);
    auto leaves = reader->manifest().GetFieldIndices(fields);
    ok_or_fail(leaves.status(), where);
    auto batches = arrow_call(where, [&] { return reader->GetRecordBatchReader({g}, *leaves); });
    ok_or_fail(batches.status(), where);
    for (int64_t first = 0;;) {
      std::shared_ptr<arrow::RecordBatch> batch;
      ok_or_fail(arrow_call(where, [&] { return (*batches)->ReadNext(&batch); }), where);
      if (batch == nullptr) return;
      Slice columns;
      for (const int field : fields) {
        columns.push_back(std::make_shared<arrow::ChunkedArray>(
            batch->GetColumnByName(schema_->field(field)->name())));
      }
      each(first, std::move(columns));
      first += batch->num_rows();
    }
  }

 private:
  // Rows a slice of read_slices holds: a few MiB of tokens, which the allocator reuses for the
  // next slice rather than mapping fresh pages for a whole row group.
  static constexpr int64_t kSliceRows = 8192;

  // A reader of the file, sharing `metadata` (null: read the footer).
  arrow::Result<std::unique_ptr<parquet::arrow::FileReader>> make_reader(
      std::shared_ptr<parquet::FileMetaData> metadata) const {
    parquet::ArrowReaderProperties properties;
    properties.set_batch_size(kSliceRows);
    return parquet::arrow::FileReader::Make(
        arrow::default_memory_pool(),
        parquet::ParquetFileReader::Open(source_, parquet::default_reader_properties(),
                                         std::move(metadata)),
        properties);
  }

  // A reader taken from the idle ones (or a new one) for one read, given back after it.
  class Borrowed {
   public:
    explicit Borrowed(const ParquetFile& file) : file_(file) {
      {
        const std::lock_guard lock(file_.mutex_);
        if (!file_.idle_.empty()) {
          reader_ = std::move(file_.idle_.back());
          file_.idle_.pop_back();
          return;
        }
      }
      auto made = arrow_call([&] { return file_.path(); },
                             [&] { return file_.make_reader(file_.metadata_); });
      ok_or_fail(made.status(), [&] { return file_.path(); });
      reader_ = std::move(*made);
    }
    ~Borrowed() {
      const std::lock_guard lock(file_.mutex_);
      file_.idle_.push_back(std::move(reader_));
    }
    Borrowed(const Borrowed&) = delete;
    Borrowed& operator=(const Borrowed&) = delete;
    parquet::arrow::FileReader* operator->() const { return reader_.get(); }

   private:
    const ParquetFile& file_;
    std::unique_ptr<parquet::arrow::FileReader> reader_;
  };

  std::unique_ptr<InputLease> lease_;
  std::shared_ptr<arrow::io::ReadableFile> source_;
  std::shared_ptr<parquet::FileMetaData> metadata_;
  std::shared_ptr<arrow::Schema> schema_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<parquet::arrow::FileReader>> idle_;
};

// A column the dataset reads: tokens first, then the loss mask or the labels, then (Bridge's
// packed rows) the sample starts.
struct ColumnChoice {
  std::string name;
  ParquetColumnRole role;
};

// A file of the dataset with the fields of its columns and where its groups start.
struct Shard {
  std::unique_ptr<detail::TableFile> file;
  std::vector<int> fields;               // per ColumnChoice, its field in the file
  std::vector<int64_t> group_first_row;  // per group, its first row in the file
};

// A group with at least one sample, where its samples are in the dataset.
struct Group {
  size_t shard = 0;
  int group = 0;
  int64_t first_sample = 0;
};

Shard open_shard(std::unique_ptr<detail::TableFile> file,
                 const std::vector<ColumnChoice>& columns) {
  Shard s;
  s.file = std::move(file);
  const std::string& path = s.file->path();
  const std::shared_ptr<arrow::Schema> schema = s.file->schema();
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
  int64_t row = 0;
  for (int g = 0; g < s.file->num_groups(); ++g) {
    s.group_first_row.push_back(row);
    row += s.file->group_rows(g);
  }
  return s;
}

std::vector<std::string> column_types(const Shard& s) {
  const std::shared_ptr<arrow::Schema> schema = s.file->schema();
  std::vector<std::string> out;
  for (const int field : s.fields)
    out.push_back(detail::list_type_text(*schema->field(field)->type()));
  return out;
}

// The columns of `rows` rows of group g (a slice of it, or all of it), checked to hold that many.
GroupColumns group_columns_of(const Shard& s, int g, detail::TableFile::Slice slice,
                              const std::vector<ColumnChoice>& columns, int64_t rows) {
  GroupColumns out;
  for (size_t c = 0; c < columns.size(); ++c) {
    check(slice[c]->length() == rows, s.file->path(), ": ", s.file->group_noun(), " ", g,
          ": column \"", columns[c].name, "\" holds ", slice[c]->length(),
          " rows, its metadata says ", rows);
    out.emplace_back(std::move(slice[c]), columns[c].role, columns[c].name);
  }
  return out;
}

GroupColumns read_group(const Shard& s, int g, const std::vector<ColumnChoice>& columns) {
  detail::TableFile::Slice whole;
  for (const int field : s.fields) whole.push_back(s.file->read(g, field));
  return group_columns_of(s, g, std::move(whole), columns, s.file->group_rows(g));
}

// Fails unless the token column's and the mask or labels column's lengths match.
void check_same_length(int64_t tokens, int64_t other, const std::vector<ColumnChoice>& columns,
                       const std::function<std::string()>& where) {
  if (other != tokens) {  // where() is built only for the message
    fail(where(), ": \"", columns[1].name, "\" has ", other, " entries but \"", columns[0].name,
         "\" has ", tokens);
  }
}

// Row `row`'s length, after the checks make_sample makes, without building the sample.
int64_t checked_row_length(const std::vector<ParquetListColumn>& data,
                           const std::vector<ColumnChoice>& columns, int64_t row,
                           const std::function<std::string()>& where) {
  const int64_t n = data[0].checked_length(row, where);
  if (n == 0)
    fail(where(), ": \"", columns[0].name, "\" is empty: a sample needs at least one token");
  if (data.size() > 1 && columns[1].role != ParquetColumnRole::kStarts) {
    check_same_length(n, data[1].checked_length(row, where), columns, where);
  }
  return n;
}

// Row `row` of a group as sample `id`; the checks of a JSONL line.
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
  if (data.size() > 1 && columns[1].role != ParquetColumnRole::kStarts) {
    size_t got = 0;
    if (columns[1].role == ParquetColumnRole::kLossMask) {
      data[1].mask(row, s.loss_mask, where);
      got = s.loss_mask.size();
    } else {
      data[1].integers(row, s.labels, where);
      got = s.labels.size();
    }
    check_same_length(static_cast<int64_t>(s.input_ids.size()), static_cast<int64_t>(got), columns,
                      where);
  }
  return s;
}

// Where the samples of a packed row start, checked: 0 first, increasing, inside the row.
std::vector<int64_t> sample_starts(const std::vector<ParquetListColumn>& data,
                                   const std::vector<ColumnChoice>& columns, int64_t row,
                                   int64_t tokens, const std::function<std::string()>& where) {
  std::vector<int64_t> starts;
  data.back().integers(row, starts, where);
  const std::string& name = columns.back().name;
  if (starts.empty() || starts[0] != 0) {
    fail(where(), ": \"", name, "\" must start with 0 (the row's first sample), got ",
         starts.empty() ? std::string("an empty list") : std::to_string(starts[0]));
  }
  for (size_t k = 1; k < starts.size(); ++k) {
    if (starts[k] <= starts[k - 1] || starts[k] >= tokens) {
      fail(where(), ": \"", name, "\"[", k, "] = ", starts[k], " must be above \"", name, "\"[",
           k - 1, "] = ", starts[k - 1], " and below the row's ", tokens, " tokens");
    }
  }
  return starts;
}

// The sample of a packed row at tokens [begin, end), as sample `id`: those tokens and, from the
// positions' weights (position j's weight says whether token j+1 is trained), the mask of its
// tokens. Reads only that part of the row.
Sample cut_sample(const GroupColumns& data, const std::vector<ColumnChoice>& columns, int64_t row,
                  int64_t begin, int64_t end, int64_t id,
                  const std::function<std::string()>& where) {
  Sample s;
  s.id = id;
  data[0].integers(row, s.input_ids, where, {begin, end});
  if (columns[1].role == ParquetColumnRole::kLossMask) {
    std::vector<float> weights;
    data[1].mask(row, weights, where, {begin, end - 1});
    s.loss_mask.assign(static_cast<size_t>(end - begin), 0.0f);
    std::copy(weights.begin(), weights.end(), s.loss_mask.begin() + 1);
  }
  return s;
}

class TableDataset final : public Dataset {
 public:
  TableDataset(std::vector<std::unique_ptr<detail::TableFile>> files, const ParquetOptions& options,
               std::string what)
      : options_(options), what_(std::move(what)) {
    const bool packed = options.layout == TableLayout::kBridgePacked;
    columns_.push_back({options.tokens_column, ParquetColumnRole::kTokens});
    check(!packed || options.labels_column.empty(),
          "Megatron-Bridge's packed rows have no labels column; give a loss-mask column");
    check(options.loss_mask_column.empty() || options.labels_column.empty(),
          "give either a loss-mask column or a labels column, not both");
    if (!options.loss_mask_column.empty()) {
      columns_.push_back({options.loss_mask_column, ParquetColumnRole::kLossMask});
    }
    if (!options.labels_column.empty()) {
      columns_.push_back({options.labels_column, ParquetColumnRole::kLabels});
    }
    if (packed) columns_.push_back({options.seq_start_column, ParquetColumnRole::kStarts});
    check(!files.empty(), "no ", what_, " given");
    std::vector<std::string> types;
    for (auto& file : files) {
      shards_.push_back(open_shard(std::move(file), columns_));
      check_same_types(types);
    }
    scan_all();
    check(!lengths_.empty(), "the ", what_, " (", shards_.front().file->path(),
          shards_.size() > 1 ? message(" and ", shards_.size() - 1, " more") : "",
          ") hold no rows");
  }

  int64_t size() const override { return static_cast<int64_t>(lengths_.size()); }
  int64_t length(int64_t index) const override {
    check_index(index);
    return lengths_[static_cast<size_t>(index)];
  }
  Sample sample(int64_t index) const override {
    return std::move(samples(std::span<const int64_t>(&index, 1)).front());
  }
  // The groups these samples are in are read side by side, each once (or taken from the cache).
  std::vector<Sample> samples(std::span<const int64_t> indices) const override {
    std::vector<std::pair<size_t, size_t>> by_group;  // (group, position in indices)
    by_group.reserve(indices.size());
    for (size_t k = 0; k < indices.size(); ++k) {
      check_index(indices[k]);
      by_group.emplace_back(group_of(indices[k]), k);
    }
    std::sort(by_group.begin(), by_group.end());
    std::vector<size_t> run_starts;
    for (size_t k = 0; k < by_group.size(); ++k) {
      if (k == 0 || by_group[k].first != by_group[k - 1].first) run_starts.push_back(k);
    }
    std::vector<Sample> out(indices.size());
    const auto fill = [&](size_t r, const GroupColumns& data) {
      const size_t gi = by_group[run_starts[r]].first;
      const size_t end = r + 1 < run_starts.size() ? run_starts[r + 1] : by_group.size();
      for (size_t k = run_starts[r]; k < end; ++k) {
        const size_t at = by_group[k].second;
        out[at] = sample_in(groups_[gi], data, indices[at]);
      }
    };
    // Groups in the cache are read here; only the others are decoded, side by side.
    std::vector<size_t> missing;
    for (size_t r = 0; r < run_starts.size(); ++r) {
      const std::shared_ptr<const GroupColumns> data = cached(by_group[run_starts[r]].first);
      if (data != nullptr) {
        fill(r, *data);
      } else {
        missing.push_back(r);
      }
    }
    detail::ordered_parallel_map<bool>(missing.size(), threads(), [&](size_t m) {
      fill(missing[m], *decode_and_keep(by_group[run_starts[missing[m]]].first));
      return true;
    });
    return out;
  }
  std::string describe() const override {
    return message(what_, " ", shards_.front().file->path(),
                   shards_.size() > 1 ? message(" and ", shards_.size() - 1, " more") : "", " (",
                   size(), " samples",
                   options_.layout == TableLayout::kBridgePacked ? " in Megatron-Bridge packs" : "",
                   ")");
  }
  std::string locate(int64_t index) const override {
    check_index(index);
    const Group& g = groups_[group_of(index)];
    if (options_.layout == TableLayout::kRows) return where(g, index - g.first_sample);
    const Place& p = places_[static_cast<size_t>(index)];
    return message(where(g, p.row), ", token ", p.start);
  }

 private:
  // Where a sample of a packed row is: the row in its group and its first token.
  struct Place {
    int64_t row = 0;
    int64_t start = 0;
  };

  void check_index(int64_t index) const {
    check(index >= 0 && index < size(), "sample index ", index, " outside [0, ", size(),
          ") of the dataset");
  }

  // Every file's columns have the first file's types (list kind and value type).
  void check_same_types(std::vector<std::string>& first) const {
    const std::vector<std::string> now = column_types(shards_.back());
    if (first.empty()) {
      first = now;
      return;
    }
    for (size_t c = 0; c < now.size(); ++c) {
      check(now[c] == first[c], shards_.back().file->path(), ": column \"", columns_[c].name,
            "\" is ", now[c], " but it is ", first[c], " in ", shards_.front().file->path(),
            "; every file of a dataset needs the same types");
    }
  }

  // What scanning one group found: its samples' lengths and, for packed rows, their places.
  struct GroupScan {
    std::vector<int64_t> lengths;
    std::vector<Place> places;
  };

  // Reads every group of every shard (several at a time, each decoded once and dropped), checks
  // every row and keeps its samples' lengths, in file and group order.
  void scan_all() {
    std::vector<Group> all;
    for (size_t s = 0; s < shards_.size(); ++s) {
      for (int g = 0; g < static_cast<int>(shards_[s].group_first_row.size()); ++g) {
        all.push_back({s, g, 0});
      }
    }
    std::vector<GroupScan> scans = detail::ordered_parallel_map<GroupScan>(
        all.size(), threads(), [&](size_t i) { return scan_group(all[i]); });
    size_t samples = 0;
    for (const GroupScan& scan : scans) samples += scan.lengths.size();
    lengths_.reserve(samples);
    if (options_.layout == TableLayout::kBridgePacked) places_.reserve(samples);
    for (size_t i = 0; i < all.size(); ++i) {
      if (scans[i].lengths.empty()) continue;  // an empty group is no error
      all[i].first_sample = size();
      groups_.push_back(all[i]);
      lengths_.insert(lengths_.end(), scans[i].lengths.begin(), scans[i].lengths.end());
      places_.insert(places_.end(), scans[i].places.begin(), scans[i].places.end());
      std::vector<int64_t>().swap(scans[i].lengths);
      std::vector<Place>().swap(scans[i].places);
    }
  }

  // Checks the rows of a group slice by slice: their lengths and, for packed rows, their places.
  GroupScan scan_group(const Group& group) const {
    GroupScan out;
    const Shard& shard = shards_[group.shard];
    const int64_t rows = shard.file->group_rows(group.group);
    int64_t seen = 0;
    shard.file->read_slices(
        group.group, shard.fields, [&](int64_t first, detail::TableFile::Slice slice) {
          const int64_t n = slice.empty() ? 0 : slice[0]->length();
          check(first == seen && seen + n <= rows, shard.file->path(), ": ",
                shard.file->group_noun(), " ", group.group, " holds more rows than its metadata's ",
                rows);
          scan_rows(group, first,
                    group_columns_of(shard, group.group, std::move(slice), columns_, n), out);
          seen += n;
        });
    check(seen == rows, shard.file->path(), ": ", shard.file->group_noun(), " ", group.group,
          " holds ", seen, " rows, its metadata says ", rows);
    return out;
  }

  // Checks rows [first, first + n) of a group, given as `data`, adding to `out`.
  void scan_rows(const Group& group, int64_t first, const GroupColumns& data,
                 GroupScan& out) const {
    const bool packed = options_.layout == TableLayout::kBridgePacked;
    if (!packed && lengths_if_valid(data, out.lengths)) return;
    for (int64_t r = 0; r < data[0].rows(); ++r) {
      const int64_t row = first + r;
      const auto where_row = [&] { return where(group, row); };
      if (!packed) {
        out.lengths.push_back(checked_row_length(data, columns_, r, where_row));
        continue;
      }
      // The checks of make_sample, without copying the row out.
      const int64_t n = checked_row_length(data, columns_, r, where_row);
      const std::vector<int64_t> starts = sample_starts(data, columns_, r, n, where_row);
      for (size_t k = 0; k < starts.size(); ++k) {
        const int64_t end = k + 1 < starts.size() ? starts[k + 1] : n;
        out.lengths.push_back(end - starts[k]);
        out.places.push_back({row, starts[k]});
      }
    }
  }

  // Appends the rows' lengths when every row is a valid sample, checking whole columns at once;
  // otherwise appends nothing and returns false (going row by row then names the first error).
  bool lengths_if_valid(const GroupColumns& data, std::vector<int64_t>& out) const {
    std::vector<int64_t> tokens, other;
    if (!data[0].lengths_if_valid(tokens)) return false;
    if (data.size() > 1 && !data[1].lengths_if_valid(other)) return false;
    for (size_t r = 0; r < tokens.size(); ++r) {
      if (tokens[r] == 0 || (!other.empty() && other[r] != tokens[r])) return false;
    }
    out.insert(out.end(), tokens.begin(), tokens.end());
    return true;
  }

  std::string where(const Group& g, int64_t row) const {
    const Shard& s = shards_[g.shard];
    return message(s.file->path(), ": ", s.file->group_noun(), " ", g.group, ", row ",
                   s.group_first_row[static_cast<size_t>(g.group)] + row);
  }

  size_t group_of(int64_t index) const {
    const auto after =
        std::upper_bound(groups_.begin(), groups_.end(), index,
                         [](int64_t i, const Group& g) { return i < g.first_sample; });
    return static_cast<size_t>(after - groups_.begin() - 1);
  }

  // Sample `index` of group g, from the group's columns.
  Sample sample_in(const Group& g, const GroupColumns& data, int64_t index) const {
    if (options_.layout == TableLayout::kRows) {
      const int64_t row = index - g.first_sample;
      return make_sample(data, columns_, row, index, options_.labels_shifted,
                         [&] { return where(g, row); });
    }
    const Place& p = places_[static_cast<size_t>(index)];
    return cut_sample(data, columns_, p.row, p.start, p.start + length(index), index,
                      [&] { return where(g, p.row); });
  }

  unsigned threads() const {
    return options_.threads > 0 ? options_.threads : detail::reading_threads();
  }

  // Group gi's columns if the cache holds them (then the most recently used), else null.
  std::shared_ptr<const GroupColumns> cached(size_t gi) const {
    const std::lock_guard lock(mutex_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->group != gi) continue;
      cache_.splice(cache_.begin(), cache_, it);
      return cache_.front().columns;
    }
    return nullptr;
  }

  // Group gi's columns, read, and kept in the cache while its groups fit in the options'
  // cache_bytes (the least recently used go first; the newest stays whatever its size).
  std::shared_ptr<const GroupColumns> decode_and_keep(size_t gi) const {
    auto columns = std::make_shared<const GroupColumns>(
        read_group(shards_[groups_[gi].shard], groups_[gi].group, columns_));
    int64_t bytes = 0;
    for (const ParquetListColumn& c : *columns) bytes += c.bytes();
    const std::lock_guard lock(mutex_);
    for (const CachedGroup& c : cache_) {
      if (c.group == gi) return columns;  // another call read it meanwhile
    }
    cache_.push_front({gi, columns, bytes});
    cached_bytes_ += bytes;
    while (cache_.size() > 1 && cached_bytes_ > options_.cache_bytes) {
      cached_bytes_ -= cache_.back().bytes;
      cache_.pop_back();
    }
    return columns;
  }

  struct CachedGroup {
    size_t group = 0;
    std::shared_ptr<const GroupColumns> columns;
    int64_t bytes = 0;
  };
  ParquetOptions options_;
  std::string what_;
  std::vector<ColumnChoice> columns_;
  std::vector<Shard> shards_;
  std::vector<Group> groups_;
  std::vector<int64_t> lengths_;
  std::vector<Place> places_;             // kBridgePacked: per sample
  mutable std::mutex mutex_;              // guards the cache
  mutable std::list<CachedGroup> cache_;  // most recently used first
  mutable int64_t cached_bytes_ = 0;
};

std::unique_ptr<Dataset> open_parquet_files(const std::vector<std::string>& paths,
                                            const ParquetOptions& options, Hash64* hash) {
  std::vector<std::unique_ptr<detail::TableFile>> files;
  for (const std::string& path : paths) {
    auto file = std::make_unique<ParquetFile>(path);
    if (hash != nullptr) hash_size_and_footer(file->file(), *hash);
    files.push_back(std::move(file));
  }
  return std::make_unique<TableDataset>(std::move(files), options, "Parquet files");
}

OpenedPackSource open_parquet_source(const PackSource& source) {
  return detail::reopen_table_source(source, &open_parquet_files);
}

}  // namespace

bool parquet_supported() {
  return true;
}

std::unique_ptr<Dataset> load_parquet_dataset(const std::vector<std::string>& paths,
                                              const ParquetOptions& options) {
  return open_parquet_files(expand_parquet_paths(paths), options, nullptr);
}

void register_parquet_pack_source() {
  register_pack_source_kind("parquet", open_parquet_source);
}

}  // namespace thdpack

namespace thdpack::detail {

std::unique_ptr<Dataset> make_table_dataset(std::vector<std::unique_ptr<TableFile>> files,
                                            const ParquetOptions& options,
                                            const std::string& what) {
  return std::make_unique<TableDataset>(std::move(files), options, what);
}

}  // namespace thdpack::detail
