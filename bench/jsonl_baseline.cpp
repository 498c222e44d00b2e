#include "jsonl_baseline.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/json_text.hpp"
#include "data/readers.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/input_file.hpp"

namespace thdpack::bench {
namespace {

using nlohmann::json;

constexpr int64_t kIgnoreLabel = -100;  // Hugging Face / PyTorch ignore_index

// Every handler returns false to stop at the first thing the fast path does not take.
class SampleEvents {
 public:
  // The values go to `scratch` (cleared here), which keeps its capacity from line to line.
  SampleEvents(Sample& scratch, bool ignore_unknown_keys)
      : sample_(scratch), ignore_unknown_keys_(ignore_unknown_keys) {
    sample_.input_ids.clear();
    sample_.labels.clear();
    sample_.loss_mask.clear();
  }

  bool null() { return other_scalar(); }
  bool boolean(bool value) {
    if (field_ == Field::kMask && depth_ == 2) {
      sample_.loss_mask.push_back(value ? 1.0f : 0.0f);
      return true;
    }
    return other_scalar();
  }
  bool number_integer(int64_t value) { return integer(value); }
  bool number_unsigned(uint64_t value) {
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return other_scalar();
    return integer(static_cast<int64_t>(value));
  }
  bool number_float(double value, const std::string&) {
    if (field_ == Field::kMask && depth_ == 2 && (value == 0.0 || value == 1.0)) {
      sample_.loss_mask.push_back(static_cast<float>(value));
      return true;
    }
    return other_scalar();
  }
  bool string(std::string&) { return other_scalar(); }
  bool binary(json::binary_t&) { return false; }

  bool start_object(size_t) {
    if (depth_ != 0) return false;  // nested objects: the document reader
    depth_ = 1;
    return true;
  }
  bool end_object() {
    depth_ = 0;
    return true;
  }
  bool key(std::string& name) {
    if (std::find(keys_.begin(), keys_.end(), name) != keys_.end()) return false;  // twice
    keys_.push_back(name);
    if (name == "input_ids") {
      field_ = Field::kIds;
    } else if (name == "labels") {
      field_ = Field::kLabels;
    } else if (name == "loss_mask") {
      field_ = Field::kMask;
    } else {
      if (!ignore_unknown_keys_) return false;
      field_ = Field::kIgnored;
    }
    return true;
  }
  bool start_array(size_t) {
    if (depth_ == 0) return false;                               // a top-level array
    if (depth_ >= 2 && field_ != Field::kIgnored) return false;  // a list inside a known list
    if (depth_ == 1) have_[static_cast<int>(field_)] = true;
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(size_t, const std::string&, const json::exception&) { return false; }

  bool has(int field) const { return have_[field]; }

 private:
  enum class Field { kIds, kLabels, kMask, kIgnored };

  bool integer(int64_t value) {
    if (depth_ == 2 && field_ == Field::kIds && value >= 0) {
      sample_.input_ids.push_back(value);
      return true;
    }
    if (depth_ == 2 && field_ == Field::kLabels && (value >= 0 || value == kIgnoreLabel)) {
      sample_.labels.push_back(value);
      return true;
    }
    if (depth_ == 2 && field_ == Field::kMask && (value == 0 || value == 1)) {
      sample_.loss_mask.push_back(static_cast<float>(value));
      return true;
    }
    return other_scalar();
  }
  // A value the sample does not take: fine inside an ignored key, wrong anywhere else.
  bool other_scalar() const { return field_ == Field::kIgnored && depth_ >= 1; }

  Sample& sample_;
  bool ignore_unknown_keys_;
  int depth_ = 0;  // 0 outside the line's object, 1 in it, 2 and more in a key's lists
  Field field_ = Field::kIgnored;
  bool have_[4] = {false, false, false, false};
  std::vector<std::string> keys_;
};

// The line as a sample when the event reader takes it (its whole shape a valid sample).
std::optional<Sample> parse_sample_events(std::string_view line, int64_t id,
                                          const JsonlOptions& options) {
  thread_local Sample scratch;
  SampleEvents events(scratch, options.ignore_unknown_keys);
  if (!json::sax_parse(line.begin(), line.end(), &events)) return std::nullopt;
  const bool ids = events.has(0), labels = events.has(1), mask = events.has(2);
  if (!ids || scratch.input_ids.empty() || (labels && mask) ||
      (labels && scratch.labels.size() != scratch.input_ids.size()) ||
      (mask && scratch.loss_mask.size() != scratch.input_ids.size())) {
    return std::nullopt;
  }
  // Copies of exactly their size: a dataset holds every sample, so no growth slack.
  Sample sample;
  sample.id = id;
  sample.labels_shifted = options.labels_shifted;
  sample.input_ids.assign(scratch.input_ids.begin(), scratch.input_ids.end());
  sample.labels.assign(scratch.labels.begin(), scratch.labels.end());
  sample.loss_mask.assign(scratch.loss_mask.begin(), scratch.loss_mask.end());
  return sample;
}

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

Sample baseline_parse_jsonl_line(const std::string& line, int64_t id, const JsonlOptions& options,
                                 const std::string& where) {
  const std::string_view text = detail::skip_utf8_bom(line);
  detail::check_json_bytes_and_depth(text, where);
  if (auto sample = parse_sample_events(text, id, options)) return std::move(*sample);
  return detail::parse_jsonl_document(line, id, options, where);
}

std::vector<Sample> baseline_load_jsonl(const std::string& path, const JsonlOptions& options) {
  const InputFile file(path, "JSONL file");
  InputStream in(file);
  std::vector<Sample> samples;
  std::string line;
  int64_t line_no = 0;
  while (
      read_bounded_line(in, line, kMaxJsonlLineBytes, path + ":" + std::to_string(line_no + 1))) {
    ++line_no;
    if (blank(line)) continue;
    samples.push_back(baseline_parse_jsonl_line(line, static_cast<int64_t>(samples.size()), options,
                                                path + ":" + std::to_string(line_no)));
  }
  check(!samples.empty(), "JSONL file '", path, "' holds no samples");
  return samples;
}

}  // namespace thdpack::bench
