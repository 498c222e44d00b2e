// Megatron-Bridge's packed-SFT Parquet (bridge_parquet.hpp), written with the Arrow and Parquet
// C++ libraries of pyarrow's wheel.

#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/io/interfaces.h>
#include <arrow/table.h>
#include <parquet/arrow/writer.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <vector>

#include "core/ordered_parallel.hpp"
#include "data/packed_tokens.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/bridge_parquet.hpp"
#include "thdpack/data/output_file.hpp"

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

// The columns of a packed row: the pack's tokens, their loss weights, where each sample starts.
std::shared_ptr<arrow::Schema> row_schema() {
  return arrow::schema({arrow::field("input_ids", arrow::list(arrow::int32())),
                        arrow::field("loss_mask", arrow::list(arrow::int8())),
                        arrow::field("seq_start_id", arrow::list(arrow::int32()))});
}

// A list column of `count` rows whose row r is values [offsets[r], offsets[r + 1]).
std::shared_ptr<arrow::Array> list_of(std::shared_ptr<arrow::DataType> type,
                                      std::vector<int32_t> offsets,
                                      std::shared_ptr<arrow::Array> values) {
  const auto count = static_cast<int64_t>(offsets.size()) - 1;
  return std::make_shared<arrow::ListArray>(
      std::move(type), count, arrow::Buffer::FromVector(std::move(offsets)), std::move(values));
}

// Packs [first, last) as one row group: the tokens and weights straight from `packed` (no copy),
// and the samples' starts.
std::shared_ptr<arrow::Table> row_group(const detail::PackedTokens& packed, const Bins& packs,
                                        const Dataset& dataset, int64_t first, int64_t last) {
  const int64_t begin = packed.pack_start(first);
  const int64_t tokens = packed.pack_start(last) - begin;
  check(tokens <= std::numeric_limits<int32_t>::max(), "packs ", first, " to ", last - 1, " hold ",
        tokens,
        " tokens, past the int32 offsets of a row group's lists; write fewer packs per "
        "row group");
  std::vector<int32_t> offsets, sample_offsets{0}, starts;
  for (int64_t q = first; q <= last; ++q) {
    offsets.push_back(static_cast<int32_t>(packed.pack_start(q) - begin));
  }
  for (int64_t q = first; q < last; ++q) {
    int64_t at = 0;
    for (const int64_t id : packs.bin(q)) {
      starts.push_back(static_cast<int32_t>(at));
      at += dataset.length(id);
    }
    check(at <= std::numeric_limits<int32_t>::max(), "pack ", q, " holds ", at,
          " tokens, past seq_start_id's int32");
    sample_offsets.push_back(static_cast<int32_t>(starts.size()));
  }
  const auto wrap = [&](const void* data, int64_t bytes) {
    return std::make_shared<arrow::Buffer>(static_cast<const uint8_t*>(data), bytes);
  };
  auto ids = std::make_shared<arrow::Int32Array>(
      tokens, wrap(packed.tokens() + begin, tokens * static_cast<int64_t>(sizeof(int32_t))));
  auto weights = std::make_shared<arrow::Int8Array>(tokens, wrap(packed.weights() + begin, tokens));
  const auto sample_count = static_cast<int64_t>(starts.size());
  auto starts_values = std::make_shared<arrow::Int32Array>(
      sample_count, arrow::Buffer::FromVector(std::move(starts)));
  return arrow::Table::Make(
      row_schema(),
      {list_of(arrow::list(arrow::int32()), offsets, std::move(ids)),
       list_of(arrow::list(arrow::int8()), std::move(offsets), std::move(weights)),
       list_of(arrow::list(arrow::int32()), std::move(sample_offsets), std::move(starts_values))});
}

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

// Encodes packs [first, last) as the Parquet content of `file` (committed by the caller).
void write_shard(const detail::PackedTokens& packed, const Dataset& dataset, const Bins& packs,
                 int64_t first, int64_t last, OutputFile& file,
                 const BridgeParquetOptions& options) {
  auto stream = std::make_shared<OutputFileStream>(file);
  auto writer =
      parquet::arrow::FileWriter::Open(*row_schema(), arrow::default_memory_pool(), stream);
  ok_or_fail(writer.status(), file.path());
  for (int64_t p = first; p < last; p += options.packs_per_row_group) {
    const auto table =
        row_group(packed, packs, dataset, p, std::min(last, p + options.packs_per_row_group));
    ok_or_fail((*writer)->WriteTable(*table, table->num_rows()), file.path());
  }
  ok_or_fail((*writer)->Close(), file.path());
}

}  // namespace

std::vector<std::string> write_bridge_parquet(const Dataset& dataset, const Bins& packs,
                                              const std::string& folder,
                                              const BridgeParquetOptions& options) {
  check(options.packs_per_shard >= 1 && options.packs_per_row_group >= 1,
        "packs per shard and per row group must be >= 1");
  require_no_parquet_in(folder);
  const detail::PackedTokens packed(dataset, packs, folder);
  const int64_t shards =
      std::max<int64_t>(1, (packs.count() + options.packs_per_shard - 1) / options.packs_per_shard);
  // A few shards at a time are encoded side by side, then committed in order on this thread
  // (where the caller's DeferredCommits scope lives).
  const unsigned threads = detail::reading_threads();
  std::vector<std::string> paths;
  for (int64_t wave = 0; wave < shards; wave += threads) {
    const int64_t count = std::min<int64_t>(threads, shards - wave);
    std::vector<OutputFile> files;
    files.reserve(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) {
      paths.push_back(shard_name(folder, wave + k));
      files.emplace_back(paths.back());
    }
    detail::ordered_parallel_map<bool>(static_cast<size_t>(count), threads, [&](size_t k) {
      const int64_t first = (wave + static_cast<int64_t>(k)) * options.packs_per_shard;
      write_shard(packed, dataset, packs, first,
                  std::min(packs.count(), first + options.packs_per_shard), files[k], options);
      return true;
    });
    for (OutputFile& file : files) file.commit();
  }
  return paths;
}

}  // namespace thdpack
