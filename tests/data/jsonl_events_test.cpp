// A JSONL line is read event by event into its sample (no JSON document, which allocates in its
// destructor), falling back to the document reader to say what is wrong: over thousands of seeded
// lines, valid and not, the two give the same sample or the same message.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "data/readers.hpp"
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

class LineMaker {
 public:
  explicit LineMaker(uint64_t seed) : rng_(seed) {}

  std::string line() {
    switch (pick(12)) {
      case 0:
        return value(2);  // anything at the top
      case 1:
        return std::string("\xEF\xBB\xBF").append(object());
      default:
        return object();
    }
  }

 private:
  uint64_t pick(uint64_t n) { return rng_() % n; }

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

TEST(JsonlEvents, TheEventReaderAndTheDocumentReaderAgreeOnEveryLine) {
  int samples = 0, errors = 0;
  for (uint64_t seed = 1; seed <= 20000; ++seed) {
    LineMaker maker(seed);
    const std::string line = maker.line();
    JsonlOptions options;
    options.ignore_unknown_keys = seed % 2 == 0;
    options.labels_shifted = seed % 3 == 0;
    const std::string where = std::string("data.jsonl:").append(std::to_string(seed));
    const std::string fast = outcome(
        [&] { return detail::parse_jsonl_line(line, static_cast<int64_t>(seed), options, where); });
    const std::string document = outcome([&] {
      return detail::parse_jsonl_document(line, static_cast<int64_t>(seed), options, where);
    });
    ASSERT_EQ(fast, document) << "line: " << line;
    (fast.rfind("sample", 0) == 0 ? samples : errors) += 1;
  }
  // Both kinds well represented.
  EXPECT_GT(samples, 2000);
  EXPECT_GT(errors, 3000);
}

}  // namespace
}  // namespace thdpack
