#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include <nlohmann/json.hpp>

#include "data/json_text.hpp"
#include "data/jsonl_fast.hpp"
#include "data/jsonl_index.hpp"
#include "data/readers.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/jsonl_dataset.hpp"

namespace thdpack {
namespace {

using nlohmann::json;

constexpr int64_t kIgnoreLabel = -100;  // Hugging Face / PyTorch ignore_index

class JsonlDataset final : public detail::JsonlIndexedDataset {
 public:
  JsonlDataset(std::string path, std::vector<Sample> samples, detail::JsonlIndex index,
               std::unique_ptr<InputLease> lease)
      : path_(std::move(path)),
        samples_(std::move(samples)),
        index_(std::move(index)),
        lease_(std::move(lease)) {}

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int64_t length(int64_t index) const override {
    return static_cast<int64_t>(at(index).input_ids.size());
  }
  Sample sample(int64_t index) const override { return at(index); }
  std::string describe() const override {
    return "jsonl " + path_ + " (" + std::to_string(samples_.size()) + " samples)";
  }
  std::string locate(int64_t index) const override {
    at(index);
    return path_ + ":" + std::to_string(index_.lines[static_cast<size_t>(index)]);
  }
  const detail::JsonlIndex& jsonl_index() const override { return index_; }

 private:
  const Sample& at(int64_t index) const {
    check(index >= 0 && index < size(), "sample index ", index, " outside [0, ", size(), ") of ",
          path_);
    return samples_[static_cast<size_t>(index)];
  }

  std::string path_;
  std::vector<Sample> samples_;
  detail::JsonlIndex index_;           // where each sample's line is (blank lines are skipped)
  std::unique_ptr<InputLease> lease_;  // the file stays an input in use: nothing overwrites it
};

// Parses one line's object into a Sample; `where` is "file:line" for messages.
class LineParser {
 public:
  LineParser(const JsonlOptions& options, std::string where)
      : options_(options), where_(std::move(where)) {}

  Sample parse(const std::string& line, int64_t id) {
    const json object = detail::parse_json_strictly(line, where_);
    if (!object.is_object()) fail("expected a JSON object with \"input_ids\"");
    Sample s;
    s.id = id;
    s.labels_shifted = options_.labels_shifted;
    bool has_ids = false, has_labels = false, has_mask = false;
    for (const auto& [key, value] : object.items()) {
      if (key == "input_ids") {
        s.input_ids = integers(key, value, 0);
        has_ids = true;
      } else if (key == "labels") {
        s.labels = integers(key, value, 0, kIgnoreLabel);
        has_labels = true;
      } else if (key == "loss_mask") {
        s.loss_mask = mask(key, value);
        has_mask = true;
      } else if (!options_.ignore_unknown_keys) {
        fail("unknown key \"" + detail::excerpt(key) +
             "\" (expected input_ids, loss_mask, labels; pass ignore_unknown_keys to skip others)");
      }
    }
    if (!has_ids) fail("missing \"input_ids\"");
    if (s.input_ids.empty()) fail("\"input_ids\" is empty: a sample needs at least one token");
    if (has_labels && has_mask) fail("give either \"loss_mask\" or \"labels\", not both");
    // Presence, not emptiness, decides: an empty list is as wrong as any other length mismatch.
    if (has_labels) check_length("labels", s.labels.size(), s.input_ids.size());
    if (has_mask) check_length("loss_mask", s.loss_mask.size(), s.input_ids.size());
    return s;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { thdpack::fail(where_, ": ", what); }

  // Integers >= min_value; `also_allowed` (if not 0) is one extra value below it (the ignore id).
  std::vector<int64_t> integers(const std::string& key, const json& value, int64_t min_value,
                                int64_t also_allowed = 0) {
    if (!value.is_array()) fail("\"" + key + "\" must be a list of integers");
    std::vector<int64_t> out;
    out.reserve(value.size());
    for (size_t i = 0; i < value.size(); ++i) {
      const json& v = value[i];
      if (!v.is_number_integer()) {
        fail(message("\"", key, "\"[", i, "] must be an integer, got ", detail::json_excerpt(v)));
      }
      // Values past int64 would wrap when read as int64 (2^64-100 into the ignore id -100).
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(message("\"", key, "\"[", i, "] = ", detail::json_excerpt(v),
                     " is out of range (token ids must fit int64)"));
      }
      const int64_t x = v.get<int64_t>();
      if (x < min_value && !(also_allowed != 0 && x == also_allowed)) {
        std::string why = message("\"", key, "\"[", i, "] = ", x,
                                  " is below the smallest allowed value ", min_value);
        if (also_allowed != 0) {
          why += message(" (the only other value allowed is ", also_allowed, ", the ignore id)");
        }
        fail(why);
      }
      out.push_back(x);
    }
    return out;
  }

  std::vector<float> mask(const std::string& key, const json& value) {
    if (!value.is_array()) fail("\"" + key + "\" must be a list of 0/1 values");
    std::vector<float> out;
    out.reserve(value.size());
    for (size_t i = 0; i < value.size(); ++i) {
      const json& v = value[i];
      const bool ok =
          v.is_boolean() || (v.is_number() && (v.get<double>() == 0.0 || v.get<double>() == 1.0));
      if (!ok)
        fail(message("\"", key, "\"[", i, "] must be 0 or 1, got ", detail::json_excerpt(v)));
      out.push_back(v.is_boolean() ? (v.get<bool>() ? 1.0f : 0.0f) : v.get<float>());
    }
    return out;
  }

  void check_length(const char* key, size_t got, size_t expected) const {
    if (got != expected) {
      fail(message("\"", key, "\" has ", got, " entries but \"input_ids\" has ", expected));
    }
  }

  const JsonlOptions& options_;
  std::string where_;
};

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == line.npos;
}

// The lines of a JSONL file, read through its descriptor in large blocks (not byte by byte) into
// one buffer, each line followed there by kJsonlLinePadding readable bytes for simdjson. Lines and
// limits as read_bounded_line's: split at '\n' (which is not part of the line), the last one with
// or without it, none longer than kMaxJsonlLineBytes.
class JsonlLines {
 public:
  explicit JsonlLines(const InputFile& file) : file_(file) {}

  // The next line, valid until the next call, and the byte offset of its start in the file; false
  // at the end. `line_no` is the number the line will have (for the message about a line over the
  // limit).
  bool next(std::string_view& line, int64_t& line_at, int64_t line_no) {
    for (;;) {
      const char* begin = buffer_.data() + begin_;
      const size_t have = end_ - begin_;
      const void* newline = have > 0 ? std::memchr(begin, '\n', have) : nullptr;
      const size_t length =
          newline ? static_cast<size_t>(static_cast<const char*>(newline) - begin) : have;
      check(length <= kMaxJsonlLineBytes, file_.path(), ":", line_no, ": line longer than ",
            kMaxJsonlLineBytes, " bytes (the limit)");
      if (newline != nullptr || (at_end_ && have > 0)) {
        line = std::string_view(begin, length);
        line_at = offset_ - static_cast<int64_t>(have);
        begin_ += newline ? length + 1 : length;
        return true;
      }
      if (at_end_) return false;
      fill();
    }
  }

 private:
  static constexpr size_t kBlock = size_t{1} << 20;

  // Moves the unread bytes to the front and reads the next block after them.
  void fill() {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    if (buffer_.size() < end_ + kBlock + detail::kJsonlLinePadding) {
      buffer_.resize(std::max(2 * buffer_.size(), end_ + kBlock + detail::kJsonlLinePadding));
    }
    const size_t got = file_.read_at(offset_, buffer_.data() + end_, kBlock);
    offset_ += static_cast<int64_t>(got);
    end_ += got;
    at_end_ = got == 0;
  }

  const InputFile& file_;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // the unread bytes in buffer_
  int64_t offset_ = 0;          // of the byte after them in the file
  bool at_end_ = false;
};

}  // namespace

Sample detail::parse_jsonl_line(const std::string& line, int64_t id, const JsonlOptions& options,
                                const std::string& where) {
  thread_local JsonlFastReader fast;
  Sample sample;
  if (fast.read(skip_utf8_bom(line), JsonlFastReader::Bytes::kCopy, id, options, sample)) {
    return sample;
  }
  // Not a valid sample (or a shape the fast reader leaves): the strict reader says why.
  return parse_jsonl_document(line, id, options, where);
}

Sample detail::parse_jsonl_document(const std::string& line, int64_t id,
                                    const JsonlOptions& options, const std::string& where) {
  return LineParser(options, where).parse(line, id);
}

std::unique_ptr<Dataset> load_jsonl_dataset(const std::string& path, const JsonlOptions& options) {
  return detail::load_jsonl(std::make_shared<const InputFile>(path, "JSONL file"), options);
}

std::unique_ptr<Dataset> detail::load_jsonl(std::shared_ptr<const InputFile> file,
                                            const JsonlOptions& options) {
  const std::string path = file->path();
  auto lease = std::make_unique<InputLease>(std::move(file));
  JsonlLines in(lease->file());
  detail::JsonlFastReader fast;
  std::vector<Sample> samples;
  detail::JsonlIndex index;
  index.options = options;
  std::string_view line;
  int64_t line_at = 0;
  int64_t line_no = 0;
  while (in.next(line, line_at, line_no + 1)) {
    ++line_no;
    if (blank(line)) continue;
    const auto id = static_cast<int64_t>(samples.size());
    Sample& sample = samples.emplace_back();
    if (!fast.read(detail::skip_utf8_bom(line), detail::JsonlFastReader::Bytes::kPadded, id,
                   options, sample)) {
      sample = detail::parse_jsonl_document(std::string(line), id, options,
                                            path + ":" + std::to_string(line_no));
    }
    index.offsets.push_back(line_at);
    index.bytes.push_back(static_cast<int64_t>(line.size()));
    index.lines.push_back(line_no);
    index.lengths.push_back(static_cast<int64_t>(sample.input_ids.size()));
  }
  if (samples.empty()) fail("JSONL file '", path, "' holds no samples");
  return std::make_unique<JsonlDataset>(path, std::move(samples), std::move(index),
                                        std::move(lease));
}

}  // namespace thdpack
