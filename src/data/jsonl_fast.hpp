#pragma once
// The common path of a JSONL line, read straight into a Sample: first by a one-pass reader of the
// common shape ({"input_ids":[...]} and a mask or labels, integers converted eight digits at a
// time), else by simdjson (SIMD, validating the whole line). It takes only lines that are valid
// samples; for anything else (an error, or a rarer shape such as a number past int64 in an ignored
// key) it says no, and the strict document reader of jsonl_dataset.cpp reads the line again: it
// decides, and writes the message. So what is accepted, and every message, is the strict reader's,
// for every input.

#include <cstddef>
#include <memory>
#include <string_view>

#include "thdpack/core/dataset.hpp"
#include "thdpack/data/jsonl_dataset.hpp"

namespace thdpack::detail {

/// Bytes past the end of a line that JsonlFastReader::read may read when the line is `kPadded`
/// (simdjson reads in 64-byte blocks; their content does not matter).
inline constexpr size_t kJsonlLinePadding = 64;

/// One reader per thread: it keeps simdjson's buffers from line to line.
class JsonlFastReader {
 public:
  /// How read() may use the bytes after a line: `kPadded`, kJsonlLinePadding of them are readable;
  /// `kCopy`, none are (the line is copied into a padded buffer first).
  enum class Bytes { kPadded, kCopy };

  JsonlFastReader();
  ~JsonlFastReader();
  JsonlFastReader(const JsonlFastReader&) = delete;
  JsonlFastReader& operator=(const JsonlFastReader&) = delete;

  /// Fills `out` with `line` (its UTF-8 BOM already skipped) as sample `id` and returns true when
  /// it is a valid sample under `options` that the strict reader would read as exactly that
  /// sample; returns false otherwise (`out` is then unspecified). Never throws InvalidArgument.
  bool read(std::string_view line, Bytes bytes, int64_t id, const JsonlOptions& options,
            Sample& out);

 private:
  struct Parser;
  std::unique_ptr<Parser> parser_;
};

}  // namespace thdpack::detail
