#pragma once
// Where the samples of a JSONL file are: what a pack file (version 4) records of its JSONL source
// so that reopening it reads only the lines asked for, and the dataset that reads them so.

#include <cstdint>
#include <memory>
#include <vector>

#include "thdpack/core/dataset.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/jsonl_dataset.hpp"

namespace thdpack::detail {

/// One entry per sample, in sample order; the options the lines were read with.
struct JsonlIndex {
  JsonlOptions options;
  std::vector<int64_t> offsets;  ///< byte offset of the sample's line in the file
  std::vector<int64_t> bytes;    ///< the line's length in bytes, without its '\n'
  std::vector<int64_t> lines;    ///< the line's number, from 1 (blank lines count)
  std::vector<int64_t> lengths;  ///< the sample's tokens (input_ids)

  int64_t size() const { return static_cast<int64_t>(offsets.size()); }
};

/// A dataset of a JSONL file that knows its index: load_jsonl's and open_indexed_jsonl's.
class JsonlIndexedDataset : public Dataset {
 public:
  virtual const JsonlIndex& jsonl_index() const = 0;
};

/// The index of a dataset read by load_jsonl or open_indexed_jsonl, or nullptr for any other.
const JsonlIndex* jsonl_index_of(const Dataset& dataset);

/// A JSONL dataset over `file` (leased for the dataset's life) that answers size and length from
/// `index` and reads a sample's line only when asked for it: its bytes read at its offset through
/// the file's descriptor (no shared file position, so samples may be read from several threads),
/// then parsed by parse_jsonl_line with `index.options`, so each sample is the one load_jsonl
/// gives. `index` lists lines in rising order, apart from each other (parse_pack_file checks it).
/// Opening reads no line; it throws InvalidArgument naming "file:line" when the last line of the
/// index ends past the end of the file. sample() throws InvalidArgument naming "file:line" when the
/// line is not a valid sample, holds another number of tokens than the index says, or can no
/// longer be read whole.
std::unique_ptr<Dataset> open_indexed_jsonl(std::shared_ptr<const InputFile> file,
                                            JsonlIndex index);

}  // namespace thdpack::detail
