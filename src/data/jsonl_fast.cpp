#include "data/jsonl_fast.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "data/json_text.hpp"

namespace thdpack::detail {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

static_assert(kJsonlLinePadding >= simdjson::SIMDJSON_PADDING);

constexpr int64_t kIgnoreLabel = -100;  // Hugging Face / PyTorch ignore_index

// Keys given twice anywhere in `value` (the strict reader refuses them; simdjson keeps both).
// `keys` is scratch space, reused from call to call.
bool has_duplicate_keys(const element& value, std::vector<std::string_view>& keys) {
  if (value.type() == element_type::ARRAY) {
    const array items = value.get_array().value_unsafe();
    for (const element item : items) {
      if (has_duplicate_keys(item, keys)) return true;
    }
    return false;
  }
  if (value.type() != element_type::OBJECT) return false;
  const object members = value.get_object().value_unsafe();
  const size_t first = keys.size();
  for (const auto member : members) keys.push_back(member.key);
  std::sort(keys.begin() + static_cast<std::ptrdiff_t>(first), keys.end());
  const bool twice = std::adjacent_find(keys.begin() + static_cast<std::ptrdiff_t>(first),
                                        keys.end()) != keys.end();
  keys.resize(first);
  if (twice) return true;
  for (const auto member : members) {
    if (has_duplicate_keys(member.value, keys)) return true;
  }
  return false;
}

// Integers >= 0, and `also_allowed` (if not 0); false at anything else (a fraction, a number past
// int64 (simdjson's UINT64), a nested list, ...).
bool integers(const element& value, int64_t also_allowed, std::vector<int64_t>& out) {
  if (value.type() != element_type::ARRAY) return false;
  const array items = value.get_array().value_unsafe();
  out.clear();
  out.reserve(items.size());
  for (const element item : items) {
    if (item.type() != element_type::INT64) return false;
    const int64_t x = item.get_int64().value_unsafe();
    if (x < 0 && !(also_allowed != 0 && x == also_allowed)) return false;
    out.push_back(x);
  }
  return true;
}

// 0/1 values: booleans, integers, or numbers written with a fraction or exponent that equal 0 or
// 1 (kept as the float the strict reader keeps, -0.0 included).
bool mask(const element& value, std::vector<float>& out) {
  if (value.type() != element_type::ARRAY) return false;
  const array items = value.get_array().value_unsafe();
  out.clear();
  out.reserve(items.size());
  for (const element item : items) {
    switch (item.type()) {
      case element_type::BOOL:
        out.push_back(item.get_bool().value_unsafe() ? 1.0f : 0.0f);
        break;
      case element_type::INT64: {
        const int64_t x = item.get_int64().value_unsafe();
        if (x != 0 && x != 1) return false;
        out.push_back(static_cast<float>(x));
        break;
      }
      case element_type::DOUBLE: {
        const double x = item.get_double().value_unsafe();
        if (x != 0.0 && x != 1.0) return false;
        out.push_back(static_cast<float>(x));
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

constexpr uint64_t kBytes(uint8_t b) {
  return 0x0101010101010101ULL * b;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// The common shape of a line, read in one pass over its bytes: {"input_ids":[...]} with
// "loss_mask" or "labels" or neither, keys written without escapes, integers of at most 18 digits
// (in a mask: 0, 1, true or false), JSON whitespace between any two tokens. Every byte of the line
// is checked against this grammar, a subset of JSON, so what it takes is valid JSON and holds no
// NUL, no BOM, no string but the three keys (no UTF-8 to check), no nesting past 2 and no key
// twice; read() says false at the first byte outside it, and simdjson reads the line instead.
// Integers are converted eight digits at a time (SWAR). Bytes up to kJsonlLinePadding past the end
// are read, never used.
class PlainLine {
 public:
  PlainLine(std::string_view line, std::vector<int64_t>& ids, std::vector<int64_t>& labels,
            std::vector<float>& mask)
      : p_(line.data()), end_(line.data() + line.size()), ids_(ids), labels_(labels), mask_(mask) {
    ids_.clear();
    labels_.clear();
    mask_.clear();
  }

  bool read(Sample& out) {
    if (!eat('{')) return false;
    bool has_ids = false, has_labels = false, has_mask = false;
    for (;;) {
      skip_space();
      if (take_key("\"input_ids\"")) {
        if (has_ids || !eat(':') || !list([&] { return id(ids_); })) return false;
        has_ids = true;
      } else if (take_key("\"labels\"")) {
        if (has_labels || !eat(':') || !list([&] { return label(labels_); })) return false;
        has_labels = true;
      } else if (take_key("\"loss_mask\"")) {
        if (has_mask || !eat(':') || !list([&] { return mask_value(); })) return false;
        has_mask = true;
      } else {
        return false;
      }
      if (eat(',')) continue;
      if (eat('}')) break;
      return false;
    }
    skip_space();
    if (p_ != end_ || !has_ids || ids_.empty() || (has_labels && has_mask) ||
        (has_labels && labels_.size() != ids_.size()) ||
        (has_mask && mask_.size() != ids_.size())) {
      return false;
    }
    // Copies of exactly their size: a dataset holds every sample, so no growth slack.
    out.input_ids.assign(ids_.begin(), ids_.end());
    out.labels.assign(labels_.begin(), labels_.begin() + (has_labels ? labels_.size() : 0));
    out.loss_mask.assign(mask_.begin(), mask_.begin() + (has_mask ? mask_.size() : 0));
    return true;
  }

 private:
  void skip_space() {
    while (p_ < end_ && is_space(*p_)) ++p_;
  }
  bool eat(char c) {
    skip_space();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  bool take_key(std::string_view quoted) {
    if (static_cast<size_t>(end_ - p_) < quoted.size() ||
        std::memcmp(p_, quoted.data(), quoted.size()) != 0) {
      return false;
    }
    p_ += quoted.size();
    return true;
  }

  // '[' values separated by ',' ']', each read by `value` at its first byte.
  template <class Value>
  bool list(Value value) {
    if (!eat('[')) return false;
    skip_space();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      if (!value()) return false;  // which leaves p_ before the end
      char c = *p_++;
      if (c == ',') {  // the usual case: on to the next value
        skip_space();
        continue;
      }
      if (is_space(c)) {
        skip_space();
        if (p_ == end_) return false;
        c = *p_++;
      }
      if (c == ']') return true;
      if (c != ',') return false;
      skip_space();
    }
  }

  bool id(std::vector<int64_t>& out) {
    int64_t x = 0;
    if (!integer(x) || x < 0) return false;
    out.push_back(x);
    return true;
  }
  bool label(std::vector<int64_t>& out) {
    int64_t x = 0;
    if (!integer(x) || (x < 0 && x != kIgnoreLabel)) return false;
    out.push_back(x);
    return true;
  }
  bool mask_value() {
    if ((*p_ == '0' || *p_ == '1') && end_ - p_ > 1 && ends_value(p_[1])) {  // the usual case
      mask_.push_back(*p_++ == '1' ? 1.0f : 0.0f);
    } else if (*p_ == 't') {
      if (!literal("true")) return false;
      mask_.push_back(1.0f);
    } else if (*p_ == 'f') {
      if (!literal("false")) return false;
      mask_.push_back(0.0f);
    } else {
      int64_t x = 0;
      if (!integer(x) || (x != 0 && x != 1)) return false;
      mask_.push_back(static_cast<float>(x));
    }
    return true;
  }
  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) <= word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0 || !ends_value(p_[word.size()])) {
      return false;
    }
    p_ += word.size();
    return true;
  }
  // What may follow a value in a list; anything else ('.', 'e', a letter) is not this grammar.
  static bool ends_value(char c) { return c == ',' || c == ']' || is_space(c); }

  // -?(0|[1-9][0-9]*) of at most 18 digits, followed by a byte that ends a value.
  bool integer(int64_t& value) {
    const bool negative = p_ != end_ && *p_ == '-';
    p_ += negative;
    uint64_t chunk = 0;
    std::memcpy(&chunk, p_, sizeof chunk);  // within the padding past the end
    // Each byte minus '0': a digit when below 10, so adding 0x76 leaves its high bit clear. A
    // borrow or carry out of a byte only disturbs the bytes after it, past the first non-digit.
    const uint64_t values = chunk - kBytes('0');
    const uint64_t not_digit = ((values + kBytes(0x76)) | values) & kBytes(0x80);
    size_t digits = 0;
    uint64_t x = 0;
    if (not_digit != 0) {
      digits = static_cast<size_t>(std::countr_zero(not_digit)) / 8;
      if (digits == 0 || digits >= static_cast<size_t>(end_ - p_)) return false;
      // The digits' values, moved up so that the first is the most significant of eight (those
      // below it are zeros).
      uint64_t v = values << (8 * (8 - digits));
      v = (v & 0x00FF00FF00FF00FFULL) * 10 + ((v >> 8) & 0x00FF00FF00FF00FFULL);
      v = (v & 0x0000FFFF0000FFFFULL) * 100 + ((v >> 16) & 0x0000FFFF0000FFFFULL);
      x = (v & 0xFFFFFFFFULL) * 10000 + (v >> 32);
    } else {
      while (digits < 19 && p_ + digits < end_ && p_[digits] >= '0' && p_[digits] <= '9') {
        x = x * 10 + static_cast<uint64_t>(p_[digits] - '0');
        ++digits;
      }
      if (digits > 18 || p_ + digits == end_) return false;
    }
    if (digits > 1 && *p_ == '0') return false;  // a leading zero
    if (!ends_value(p_[digits])) return false;
    p_ += digits;
    value = negative ? -static_cast<int64_t>(x) : static_cast<int64_t>(x);
    return true;
  }

  const char* p_;
  const char* end_;
  std::vector<int64_t>& ids_;
  std::vector<int64_t>& labels_;
  std::vector<float>& mask_;
};

}  // namespace

struct JsonlFastReader::Parser {
  simdjson::dom::parser dom;
  std::vector<std::string_view> keys;  // scratch of has_duplicate_keys
  std::vector<int64_t> ids, labels;    // scratch of PlainLine, kept from line to line
  std::vector<float> mask;
  std::vector<char> copy;  // a line and its padding, for Bytes::kCopy
};

JsonlFastReader::JsonlFastReader() : parser_(std::make_unique<Parser>()) {
  // The strict reader's depth limit, level for level: deeper lines fail here and get its message.
  // (The capacity grows with the longest line; the depth stays.)
  if (parser_->dom.allocate(size_t{1} << 16, kMaxJsonDepth) != simdjson::SUCCESS) {
    throw std::bad_alloc();
  }
}

JsonlFastReader::~JsonlFastReader() = default;

bool JsonlFastReader::read(std::string_view line, Bytes bytes, int64_t id,
                           const JsonlOptions& options, Sample& out) {
  if (bytes == Bytes::kCopy) {
    std::vector<char>& copy = parser_->copy;
    copy.resize(line.size() + kJsonlLinePadding);
    std::memcpy(copy.data(), line.data(), line.size());
    line = std::string_view(copy.data(), line.size());
  }
  out.id = id;
  out.labels_shifted = options.labels_shifted;
  if (PlainLine(line, parser_->ids, parser_->labels, parser_->mask).read(out)) return true;

  // A NUL byte ends the text for nlohmann; the strict reader names its column.
  if (std::memchr(line.data(), '\0', line.size()) != nullptr) return false;
  element root;
  if (parser_->dom.parse(line.data(), line.size(), false).get(root) != simdjson::SUCCESS) {
    return false;
  }
  if (root.type() != element_type::OBJECT) return false;
  const object members = root.get_object().value_unsafe();
  bool has_ids = false, has_labels = false, has_mask = false, has_ignored = false;
  for (const auto member : members) {
    if (member.key == "input_ids") {
      if (has_ids || !integers(member.value, 0, out.input_ids)) return false;
      has_ids = true;
    } else if (member.key == "labels") {
      if (has_labels || !integers(member.value, kIgnoreLabel, out.labels)) return false;
      has_labels = true;
    } else if (member.key == "loss_mask") {
      if (has_mask || !mask(member.value, out.loss_mask)) return false;
      has_mask = true;
    } else if (!options.ignore_unknown_keys) {
      return false;
    } else {
      has_ignored = true;
    }
  }
  if (!has_ids || out.input_ids.empty() || (has_labels && has_mask) ||
      (has_labels && out.labels.size() != out.input_ids.size()) ||
      (has_mask && out.loss_mask.size() != out.input_ids.size())) {
    return false;
  }
  if (!has_labels) out.labels.clear();
  if (!has_mask) out.loss_mask.clear();
  // Known keys were seen at most once each; ignored ones may repeat, and hold objects that do.
  if (has_ignored) {
    parser_->keys.clear();
    if (has_duplicate_keys(root, parser_->keys)) return false;
  }
  return true;
}

}  // namespace thdpack::detail
