// Megatron-Bridge's packed-SFT Parquet (bridge_parquet.hpp), written with the Arrow and Parquet
// C++ libraries of pyarrow's wheel.

#include <arrow/builder.h>
#include <arrow/io/interfaces.h>
#include <arrow/table.h>
#include <parquet/arrow/writer.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <future>
#include <limits>
#include <span>
#include <vector>

#include "thdpack/core/errors.hpp"
#include "thdpack/data/bridge_parquet.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {
namespace {

namespace fs = std::filesystem;

// Arrow's writer writes into an OutputFile, so that a shard replaces nothing until complete.
class OutputFileStream final : public arrow::io::OutputStream {
 public:
  explicit OutputFileStream(OutputFile& file) : file_(file) {}
  arrow::Status Close() override {
    closed_ = true;
    return arrow::Status::OK();
  }
  bool closed() const override { return closed_; }
  arrow::Result<int64_t> Tell() const override { return written_; }
  arrow::Status Write(const void* data, int64_t n) override {
    try {
      file_.write(data, static_cast<size_t>(n));
    } catch (const std::exception& e) {
      return arrow::Status::IOError(e.what());
    }
    written_ += n;
    return arrow::Status::OK();
  }

 private:
  OutputFile& file_;
  int64_t written_ = 0;
  bool closed_ = false;
};

void ok_or_fail(const arrow::Status& status, const std::string& path) {
  if (!status.ok()) fail(path, ": ", status.message());
}

// The samples of a row group of packs, read in index order: a source that reads its files in
// blocks (Parquet row groups) then reads each block about once, not once per sample.
class SampleCache {
 public:
  SampleCache(const Dataset& dataset, const Bins& packs, int64_t first, int64_t last) {
    for (int64_t p = first; p < last; ++p) {
      const auto ids = packs.bin(p);
      ids_.insert(ids_.end(), ids.begin(), ids.end());
    }
    std::sort(ids_.begin(), ids_.end());
    samples_ = dataset.samples(ids_);
  }
  const Sample& at(int64_t id) const {
    const auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
    return samples_[static_cast<size_t>(it - ids_.begin())];
  }

 private:
  std::vector<int64_t> ids_;
  std::vector<Sample> samples_;
};

// The three list columns of a row group of packs.
class RowGroupBuilder {
 public:
  RowGroupBuilder()
      : ids_(pool(), std::make_shared<arrow::Int32Builder>()),
        mask_(pool(), std::make_shared<arrow::Int8Builder>()),
        starts_(pool(), std::make_shared<arrow::Int32Builder>()) {}

  // Room for `packs` packs of `samples` samples and `tokens` tokens in all, so that appending
  // grows no buffer.
  void reserve(int64_t packs, int64_t samples, int64_t tokens) {
    ok(ids_.Reserve(packs));
    ok(mask_.Reserve(packs));
    ok(starts_.Reserve(packs));
    ok(ids_.value_builder()->Reserve(tokens));
    ok(mask_.value_builder()->Reserve(tokens));
    ok(starts_.value_builder()->Reserve(samples));
  }

  // Appends one pack: its samples back to back, their loss weights and where each starts.
  void add_pack(const SampleCache& samples, const Dataset& dataset, std::span<const int64_t> ids) {
    ok(ids_.Append());
    ok(mask_.Append());
    ok(starts_.Append());
    auto& tokens = static_cast<arrow::Int32Builder&>(*ids_.value_builder());
    auto& weights = static_cast<arrow::Int8Builder&>(*mask_.value_builder());
    auto& starts = static_cast<arrow::Int32Builder&>(*starts_.value_builder());
    int64_t at = 0;
    for (const int64_t id : ids) {
      const Sample& s = samples.at(id);
      const SampleView view = view_of(s);
      // pack_samples owns the label conventions: position j's target and weight.
      const PackedBatch one = pack_samples(std::span<const SampleView>(&view, 1), PackOptions{});
      check(at <= std::numeric_limits<int32_t>::max() - one.num_rows(), "a pack of ", ids.size(),
            " samples holds more than 2^31 - 1 tokens, past seq_start_id's int32");
      ok(starts.Append(static_cast<int32_t>(at)));
      append_sample(s, one, tokens, weights, dataset);
      at += one.num_rows();
    }
  }

  std::shared_ptr<arrow::Table> finish() {
    std::shared_ptr<arrow::Array> ids, mask, starts;
    ok(ids_.Finish(&ids));
    ok(mask_.Finish(&mask));
    ok(starts_.Finish(&starts));
    return arrow::Table::Make(schema(), {ids, mask, starts});
  }

  static std::shared_ptr<arrow::Schema> schema() {
    return arrow::schema({arrow::field("input_ids", arrow::list(arrow::int32())),
                          arrow::field("loss_mask", arrow::list(arrow::int8())),
                          arrow::field("seq_start_id", arrow::list(arrow::int32()))});
  }

 private:
  static arrow::MemoryPool* pool() { return arrow::default_memory_pool(); }
  static void ok(const arrow::Status& status) {
    check<InternalError>(status.ok(), "building a packed Parquet row: ", status.message());
  }

  static void append_sample(const Sample& s, const PackedBatch& one, arrow::Int32Builder& tokens,
                            arrow::Int8Builder& weights, const Dataset& dataset) {
    const auto n = static_cast<int64_t>(s.input_ids.size());
    for (int64_t j = 0; j < n; ++j) {
      const auto k = static_cast<size_t>(j);
      // `if`, not check(): the message names the sample's place, too slow to build per token.
      if (s.input_ids[k] > std::numeric_limits<int32_t>::max()) {
        fail("sample ", s.id, " (", dataset.locate(s.id), ") has token id ", s.input_ids[k],
             ", past the int32 of Megatron-Bridge's input_ids");
      }
      // The format has no labels: a trained position's target is the next input token.
      const bool trained = one.loss_mask[k] != 0.0f;
      if (trained && !(j + 1 < n && one.labels[k] == s.input_ids[k + 1])) {
        fail("sample ", s.id, " (", dataset.locate(s.id), ") trains position ", j, " on label ",
             one.labels[k],
             ", not its next token; Megatron-Bridge's packed Parquet has no labels "
             "column");
      }
      ok(tokens.Append(static_cast<int32_t>(s.input_ids[k])));
      ok(weights.Append(trained ? 1 : 0));
    }
  }

  arrow::ListBuilder ids_, mask_, starts_;
};

// Refuses a folder with Parquet files in it: Megatron-Bridge reads every *.parquet of a folder.
void require_no_parquet_in(const std::string& folder) {
  std::error_code error;
  fs::create_directories(folder, error);
  check(!error && fs::is_directory(folder), "--parquet-out '", folder,
        "' cannot be created as a folder: ", error ? error.message() : "not a folder");
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string ext = entry.path().extension().string();
    check(ext != ".parquet" && ext != ".pq", "'", folder, "' already holds ",
          entry.path().filename().string(),
          "; Megatron-Bridge reads every Parquet file of a folder, so give an empty or new one");
  }
}

std::string shard_name(const std::string& folder, int64_t shard) {
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%05lld.idx.parquet", static_cast<long long>(shard));
  return (fs::path(folder) / name).string();
}

// Tokens whose samples are read at once (about 12 bytes each in memory): the more packs share a
// read, the fewer times a source that reads in blocks (Parquet row groups) decodes each block.
constexpr int64_t kTokensReadAtOnce = int64_t{16} << 20;

// The end of the packs from `first` read at once: whole row groups of packs, at least one, up to
// about kTokensReadAtOnce tokens.
int64_t batch_end(const Dataset& dataset, const Bins& packs, int64_t first, int64_t last,
                  int64_t packs_per_row_group) {
  int64_t end = first, tokens = 0;
  while (end < last && (end == first || tokens < kTokensReadAtOnce)) {
    const int64_t group_end = std::min(last, end + packs_per_row_group);
    for (; end < group_end; ++end) {
      for (const int64_t id : packs.bin(end)) tokens += dataset.length(id);
    }
  }
  return end;
}

// Packs [first, last) as one row group's table.
std::shared_ptr<arrow::Table> build_row_group(const SampleCache& samples, const Dataset& dataset,
                                              const Bins& packs, int64_t first, int64_t last) {
  int64_t count = 0, tokens = 0;
  for (int64_t q = first; q < last; ++q) {
    for (const int64_t id : packs.bin(q)) tokens += dataset.length(id);
    count += static_cast<int64_t>(packs.bin(q).size());
  }
  RowGroupBuilder group;
  group.reserve(last - first, count, tokens);
  for (int64_t q = first; q < last; ++q) group.add_pack(samples, dataset, packs.bin(q));
  return group.finish();
}

void write_shard(const Dataset& dataset, const Bins& packs, int64_t first, int64_t last,
                 const std::string& path, const BridgeParquetOptions& options) {
  OutputFile file(path);
  auto stream = std::make_shared<OutputFileStream>(file);
  auto writer = parquet::arrow::FileWriter::Open(*RowGroupBuilder::schema(),
                                                 arrow::default_memory_pool(), stream);
  ok_or_fail(writer.status(), path);
  for (int64_t p = first; p < last;) {
    const int64_t loaded = batch_end(dataset, packs, p, last, options.packs_per_row_group);
    const SampleCache samples(dataset, packs, p, loaded);
    // Row group k + 1 is built on another thread while the writer encodes row group k.
    const auto build = [&](int64_t from) {
      return std::async(std::launch::async, [&, from] {
        return build_row_group(samples, dataset, packs, from,
                               std::min(loaded, from + options.packs_per_row_group));
      });
    };
    std::future<std::shared_ptr<arrow::Table>> next = build(p);
    for (; p < loaded; p += options.packs_per_row_group) {
      const std::shared_ptr<arrow::Table> table = next.get();
      if (p + options.packs_per_row_group < loaded) next = build(p + options.packs_per_row_group);
      ok_or_fail((*writer)->WriteTable(*table, table->num_rows()), path);
    }
  }
  ok_or_fail((*writer)->Close(), path);
  file.commit();
}

}  // namespace

std::vector<std::string> write_bridge_parquet(const Dataset& dataset, const Bins& packs,
                                              const std::string& folder,
                                              const BridgeParquetOptions& options) {
  check(options.packs_per_shard >= 1 && options.packs_per_row_group >= 1,
        "packs per shard and per row group must be >= 1");
  require_no_parquet_in(folder);
  std::vector<std::string> paths;
  for (int64_t first = 0; first < packs.count() || paths.empty();
       first += options.packs_per_shard) {
    paths.push_back(shard_name(folder, static_cast<int64_t>(paths.size())));
    write_shard(dataset, packs, first, std::min(packs.count(), first + options.packs_per_shard),
                paths.back(), options);
  }
  return paths;
}

}  // namespace thdpack
