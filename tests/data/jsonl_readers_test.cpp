// A JSONL line is read by simdjson into its sample, falling back to the strict document reader to
// say what is wrong. Over tens of thousands of seeded lines, valid and not, including hostile
// mutations (a flipped byte, a cut, a key twice, deep nesting, NUL, BOM, huge numbers, fractions,
// invalid UTF-8), the reader, the reader it replaced (bench/jsonl_baseline) and the document reader
// give the same sample or the same message; and whole files load into the same samples or fail
// with the same message.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "data/json_text.hpp"
#include "data/readers.hpp"
#include "jsonl_baseline.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

// "sample ids=..;labels=..;mask=.." or "error: MESSAGE".
template <class Read>
std::string outcome(Read read) {
  try {
    const Sample s = read();
    std::string text = std::string("sample id=")
                           .append(std::to_string(s.id))
                           .append(" shifted=")
                           .append(std::to_string(s.labels_shifted))
                           .append(" ids=");
    for (int64_t t : s.input_ids) text.append(std::to_string(t)).append(",");
    text.append(" labels=");
    for (int64_t t : s.labels) text.append(std::to_string(t)).append(",");
    text.append(" mask=");
    for (float m : s.loss_mask) text.append(std::to_string(m)).append(",");
    return text;
  } catch (const InvalidArgument& e) {
    return std::string("error: ") + e.what();
  }
}

std::string outcome_of(const Sample& s) {
  return outcome([&] { return s; });
}

class LineMaker {
 public:
  explicit LineMaker(uint64_t seed) : rng_(seed) {}

  // A line, mostly a valid sample's shape; every third one mutated.
  std::string line() {
    std::string text;
    switch (pick(12)) {
      case 0:
        text = value(2);  // anything at the top
        break;
      case 1:
        text = std::string("\xEF\xBB\xBF").append(object());
        break;
      default:
        text = object();
    }
    return pick(3) == 0 ? mutated(text) : text;
  }

 private:
  uint64_t pick(uint64_t n) { return rng_() % n; }

  template <size_t N>
  const char* any(const char* const (&options)[N]) {
    return options[pick(N)];
  }

  // `text` with `field` ("key":value) put first in its object (or `field`'s value alone).
  std::string with_field(std::string text, const std::string& field) {
    const size_t brace = text.find('{');
    if (brace == std::string::npos) return text;
    return text.insert(brace + 1, field + ",");
  }

  std::string mutated(std::string text) {
    const size_t at = text.empty() ? 0 : pick(text.size());
    switch (pick(10)) {
      case 0:  // a byte flipped to any value (NUL, control bytes and invalid UTF-8 included)
        if (!text.empty()) text[at] = static_cast<char>(pick(256));
        return text;
      case 1:  // cut short
        return text.substr(0, at);
      case 2: {  // a key given twice, at the top or in an ignored key's objects
        static const char* const kTwice[] = {R"("input_ids":[1])",
                                             R"("meta":1,"meta":2)",
                                             R"("meta":{"a":1,"a":[2]})",
                                             R"("labels":[5])",
                                             R"("meta":[{"b":{"c":1,"c":1}}])",
                                             R"("meta":{"a":1,"b":2})"};
        return with_field(text, any(kTwice));
      }
      case 3: {  // nesting just below, at and past the limit, in an ignored key
        const int depth = detail::kMaxJsonDepth - 2 + static_cast<int>(pick(4));
        std::string open, close;
        for (int i = 1; i < depth; ++i) {  // the line's object is the first level
          const bool list = pick(2) == 0;
          open += list ? "[" : "{\"k\":";
          close += list ? ']' : '}';
        }
        std::reverse(close.begin(), close.end());
        return with_field(text, "\"meta\":" + open + "1" + close);
      }
      case 4:  // a NUL byte
        return text.insert(at, 1, '\0');
      case 5:  // a byte order mark, at the start or inside
        return text.insert(pick(2) ? 0 : at, "\xEF\xBB\xBF");
      case 6: {  // a number for a digit: huge, fractional, signed zero, exponent
        static const char* const kNumbers[] = {
            "9223372036854775807", "9223372036854775808", "18446744073709551615",
            "18446744073709551616", "-9223372036854775808", "-9223372036854775809",
            "123456789012345678901234567890", "1e308", "1e309", "-1e-400", "1e-400", "1.0", "0.5",
            "1e0", "-0.0", "-0", "0e5", "2.0", "1.00000000000000000001", "-100.0", "1E+0",
            // the integer reader's edges: leading zeros, signs, 8, 9, 18 and 19 digits
            "00", "012", "-01", "-", "+1", "0x10", "1-2", "12345678", "123456789",
            "99999999999999999", "999999999999999999", "1000000000000000000", "-100", "-1000",
            "true", "false", "truex", "nul", "1 2", "1,,2", "[1]", "1]"};
        const size_t digit = text.find_first_of("0123456789", at);
        if (digit == std::string::npos) return text;
        return text.replace(digit, 1, any(kNumbers));
      }
      case 7: {  // an odd string in an ignored key: escapes, surrogates, invalid UTF-8
        static const char* const kStrings[] = {
            R"("\u0000")",  R"("\ud800")",      R"("\udc00")",          R"("\ud83d\ude00")",
            "\"\xC0\xAF\"", "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"", "\"\x80\"",
            "\"\x7F\"",     "\"\x1F\"",         "\"\xE2\x82\xAC\"",     R"("\/\b\f\n\r\t\"")",
            R"("\x")",      R"("\u12")",        R"("\ud800\u0041")"};
        return with_field(text, std::string("\"meta\":") + any(kStrings));
      }
      case 8: {  // whitespace, JSON's and not
        static const char* const kSpaces[] = {" ", "\t", "\r", "\n", "\f", "\v", "\xC2\xA0"};
        return text.insert(at, any(kSpaces));
      }
      default: {  // a known key escaped, or one near a known one
        static const char* const kKeys[] = {R"("input\u005fids")",  R"("Input_ids")",
                                            R"("input_ids ")",      R"("")",
                                            R"("loss_mask\u0000")", R"("loss\u005fmask")"};
        const size_t key = text.find("\"input_ids\"");
        if (key == std::string::npos) return text;
        return text.replace(key, 11, any(kKeys));
      }
    }
  }

  std::string object() {
    static const char* kKeys[] = {"input_ids", "labels", "loss_mask", "meta", "input_ids"};
    const uint64_t keys = pick(4);
    const size_t length = 1 + pick(6);
    std::string text = pick(5) == 0 ? " {" : "{";
    for (uint64_t k = 0; k < keys + 1; ++k) {
      const std::string key = kKeys[pick(keys == 0 ? 1 : 5)];
      if (k > 0) text.append(",");
      text.append("\"").append(key).append("\":");
      // Mostly a fitting list, sometimes anything.
      text.append(pick(4) == 0 ? value(2) : list(key, pick(6) == 0 ? 1 + pick(6) : length));
    }
    return text + (pick(9) == 0 ? "" : "}");
  }

  std::string list(const std::string& key, size_t length) {
    std::string text = "[";
    for (size_t i = 0; i < length; ++i) {
      if (i > 0) text.append(",");
      if (pick(10) == 0) {
        text.append(value(1));
      } else if (key == "loss_mask") {
        static const char* kMasks[] = {"0", "1", "true", "false", "1.0", "0.0"};
        text.append(kMasks[pick(6)]);
      } else if (key == "labels" && pick(3) == 0) {
        text.append("-100");
      } else {
        text.append(std::to_string(pick(50000)));
      }
    }
    return text + "]";
  }

  std::string value(int depth) {
    static const char* kScalars[] = {"0",
                                     "-1",
                                     "-100",
                                     "7",
                                     "1.5",
                                     "1e3",
                                     "true",
                                     "null",
                                     "\"x\"",
                                     "9223372036854775807",
                                     "9223372036854775808",
                                     "18446744073709551616",
                                     "1e400",
                                     "-0",
                                     "2.0",
                                     "\"\\u00e9\""};
    const uint64_t kind = pick(depth > 0 ? 5 : 3);
    if (kind == 3) {
      return std::string("[")
          .append(value(depth - 1))
          .append(",")
          .append(value(depth - 1))
          .append("]");
    }
    if (kind == 4) return std::string("{\"k\":").append(value(depth - 1)).append(",\"k2\":[]}");
    return kScalars[pick(sizeof kScalars / sizeof *kScalars)];
  }

  std::mt19937_64 rng_;
};

TEST(JsonlReaders, TheReaderTheOldReaderAndTheDocumentReaderAgreeOnEveryLine) {
  int samples = 0, errors = 0;
  for (uint64_t seed = 1; seed <= 60000; ++seed) {
    LineMaker maker(seed);
    const std::string line = maker.line();
    JsonlOptions options;
    options.ignore_unknown_keys = seed % 2 == 0;
    options.labels_shifted = seed % 3 == 0;
    const std::string where = std::string("data.jsonl:").append(std::to_string(seed));
    const auto id = static_cast<int64_t>(seed);
    const std::string fast =
        outcome([&] { return detail::parse_jsonl_line(line, id, options, where); });
    const std::string old =
        outcome([&] { return bench::baseline_parse_jsonl_line(line, id, options, where); });
    const std::string document =
        outcome([&] { return detail::parse_jsonl_document(line, id, options, where); });
    ASSERT_EQ(fast, old) << "line: " << line;
    ASSERT_EQ(fast, document) << "line: " << line;
    (fast.rfind("sample", 0) == 0 ? samples : errors) += 1;
  }
  // Both kinds well represented.
  EXPECT_GT(samples, 6000);
  EXPECT_GT(errors, 9000);
}

// Lines far longer than simdjson's first buffers, through each path: the usual shape, an ignored
// key (simdjson), and errors at their end (the strict reader), nesting past the limit included.
TEST(JsonlReaders, LongLinesTakeEveryPathAlike) {
  std::string ids;
  for (int t = 0; t < 300000; ++t) ids += std::to_string(int64_t{t} * 7919 % 150000) + ",";
  ids += "5";
  std::string deep;
  for (int i = 1; i < detail::kMaxJsonDepth; ++i) deep += "[";  // the limit, with the line's object
  deep += std::string(static_cast<size_t>(detail::kMaxJsonDepth - 1), ']');
  const std::vector<std::string> lines = {
      "{\"input_ids\":[" + ids + "]}",
      "{\"meta\":\"x\",\"input_ids\":[" + ids + "]}",
      "{\"input_ids\":[" + ids + "],\"meta\":{\"a\":1,\"a\":2}}",
      "{\"input_ids\":[" + ids + "],\"meta\":" + deep + "}",
      "{\"input_ids\":[" + ids + "],\"meta\":[" + deep + "]}",
      "{\"input_ids\":[" + ids + "],\"meta\":[1.5e400]}",
      "{\"input_ids\":[" + ids + ",-3]}",
      "{\"input_ids\":[" + ids + "]",
  };
  JsonlOptions options;
  options.ignore_unknown_keys = true;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const std::string fast =
        outcome([&] { return detail::parse_jsonl_line(line, 0, options, "long.jsonl:1"); });
    const std::string old =
        outcome([&] { return bench::baseline_parse_jsonl_line(line, 0, options, "long.jsonl:1"); });
    EXPECT_EQ(fast, old) << "line " << i;
    EXPECT_EQ(fast.rfind("sample", 0) == 0, i < 2 || i == 3)
        << "line " << i << ": " << fast.substr(0, 200);
  }
}

// Whole files: blank lines, CRLF, a last line without '\n', lines longer than the reader's 1 MiB
// blocks, and now and then a hostile line; the same samples, or the same message.
TEST(JsonlReaders, WholeFilesLoadAsTheOldReaderLoadedThem) {
  test_util::TempDir dir;
  int loaded = 0, refused = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    std::string text;
    const int lines = 1 + static_cast<int>(rng() % 200);
    for (int i = 0; i < lines; ++i) {
      const uint64_t kind = rng() % 25;
      if (kind == 0) {
        text += rng() % 2 ? "\n" : " \t\r\n";
        continue;
      }
      if (kind == 1) {  // a long line: about 1.4 MiB of ids
        text += "{\"input_ids\":[";
        for (int t = 0; t < 200000; ++t) text += std::to_string(rng() % 100000) + ",";
        text += "7]}\n";
        continue;
      }
      if (kind == 2 && seed % 3 == 0) {  // a hostile line in every third file
        text += LineMaker(rng()).line() + "\n";
        continue;
      }
      const int ids = 1 + static_cast<int>(rng() % 300);
      std::string list, mask;
      for (int t = 0; t < ids; ++t) {
        if (t > 0) list += ',';
        list += std::to_string(rng() % 150000);
        mask += t == 0 ? "1" : rng() % 2 ? ",1" : ",0";
      }
      text += "{\"input_ids\":[" + list + "]";
      if (rng() % 2) text += ",\"loss_mask\":[" + mask + "]";
      text += rng() % 4 == 0 ? "}\r\n" : "}\n";
    }
    if (seed % 2 == 0 && !text.empty() && text.back() == '\n') text.pop_back();
    const std::string path = dir.write("file" + std::to_string(seed) + ".jsonl", text);
    const JsonlOptions options;
    std::string fast, old;
    try {
      const auto dataset = load_jsonl_dataset(path, options);
      for (int64_t i = 0; i < dataset->size(); ++i) fast += outcome_of(dataset->sample(i)) + "\n";
    } catch (const InvalidArgument& e) {
      fast = std::string("error: ") + e.what();
    }
    try {
      for (const Sample& s : bench::baseline_load_jsonl(path, options)) {
        old += outcome_of(s) + "\n";
      }
    } catch (const InvalidArgument& e) {
      old = std::string("error: ") + e.what();
    }
    ASSERT_EQ(fast, old) << "seed " << seed;
    (fast.rfind("error", 0) == 0 ? refused : loaded) += 1;
  }
  EXPECT_GT(loaded, 30);
  EXPECT_GT(refused, 5);
}

}  // namespace
}  // namespace thdpack
