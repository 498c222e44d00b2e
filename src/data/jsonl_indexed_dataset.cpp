// A JSONL dataset read line by line on demand through the index a pack file recorded.

#include <cstring>
#include <string>

#include "data/jsonl_index.hpp"
#include "data/readers.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

class LazyJsonlDataset final : public detail::JsonlIndexedDataset {
 public:
  LazyJsonlDataset(std::shared_ptr<const InputFile> file, detail::JsonlIndex index)
      : path_(file->path()), index_(std::move(index)), lease_(std::move(file)) {}

  int64_t size() const override { return index_.size(); }
  int64_t length(int64_t index) const override { return index_.lengths[at(index)]; }
  Sample sample(int64_t index) const override {
    const size_t i = at(index);
    const std::string where = path_ + ":" + std::to_string(index_.lines[i]);
    std::string line(static_cast<size_t>(index_.bytes[i]), '\0');
    size_t got = 0;
    while (got < line.size()) {
      const size_t n = lease_.file().read_at(index_.offsets[i] + static_cast<int64_t>(got),
                                             line.data() + got, line.size() - got);
      if (n == 0) {
        fail(where, ": the file ends at byte ", index_.offsets[i] + static_cast<int64_t>(got),
             ", inside the line of sample ", index, " (", index_.bytes[i], " bytes at byte ",
             index_.offsets[i], "): it changed since it was indexed");
      }
      got += n;
    }
    if (std::memchr(line.data(), '\n', line.size()) != nullptr) {
      fail(where, ": the ", index_.bytes[i], " bytes at byte ", index_.offsets[i],
           " indexed as sample ", index,
           " are not one line: the file changed since it was indexed");
    }
    Sample s = detail::parse_jsonl_line(line, index, index_.options, where);
    if (static_cast<int64_t>(s.input_ids.size()) != index_.lengths[i]) {
      fail(where, ": sample ", index, " holds ", s.input_ids.size(), " tokens, not the ",
           index_.lengths[i], " its index says: the file changed since it was indexed");
    }
    return s;
  }
  std::string describe() const override {
    return "jsonl " + path_ + " (" + std::to_string(size()) + " samples)";
  }
  std::string locate(int64_t index) const override {
    return path_ + ":" + std::to_string(index_.lines[at(index)]);
  }
  const detail::JsonlIndex& jsonl_index() const override { return index_; }

 private:
  size_t at(int64_t index) const {
    check(index >= 0 && index < size(), "sample index ", index, " outside [0, ", size(), ") of ",
          path_);
    return static_cast<size_t>(index);
  }

  std::string path_;
  detail::JsonlIndex index_;
  InputLease lease_;  // the file stays an input in use: nothing overwrites it
};

}  // namespace

const detail::JsonlIndex* detail::jsonl_index_of(const Dataset& dataset) {
  const auto* indexed = dynamic_cast<const JsonlIndexedDataset*>(&dataset);
  return indexed != nullptr ? &indexed->jsonl_index() : nullptr;
}

std::unique_ptr<Dataset> detail::open_indexed_jsonl(std::shared_ptr<const InputFile> file,
                                                    JsonlIndex index) {
  if (index.size() > 0) {
    const auto last = static_cast<size_t>(index.size() - 1);
    const int64_t end = index.offsets[last] + index.bytes[last];
    const int64_t size = file->size();
    if (end > size) {
      fail(file->path(), ":", index.lines[last], ": the line of sample ", last, " ends at byte ",
           end, ", past the end of the file (", size,
           " bytes): the file changed since it was indexed");
    }
  }
  return std::make_unique<LazyJsonlDataset>(std::move(file), std::move(index));
}

}  // namespace thdpack
