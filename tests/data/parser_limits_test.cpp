// The text readers at their limits, as property tests over many seeds: nesting depth, duplicated
// keys, NUL bytes, byte order marks and the length of what messages quote, for JSONL lines, mock
// dataset configs and lengths files. Each reader must give one InvalidArgument naming the file (or
// accept the text exactly); never a crash, a silently shortened text or a silently kept value.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/json_text.hpp"
#include "data/readers.hpp"
#include "expect_throw.hpp"
#include "temp_dir.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/lengths_file.hpp"
#include "thdpack/data/mock_dataset.hpp"

namespace thdpack {
namespace {

using nlohmann::json;
using test_util::expect_throw_with;
using test_util::TempDir;

constexpr int kSeeds = 200;
const std::string kBom = "\xEF\xBB\xBF";
// Longest message a reader may give: the file and position, the explanation and one excerpt.
constexpr size_t kLongestMessage = 400;

std::string parse_line_error(const std::string& line) {
  return expect_throw_with<InvalidArgument>(
      [&] { detail::parse_jsonl_line(line, 0, JsonlOptions{}, "data.jsonl:7"); }, "data.jsonl:7: ");
}

// `depth` nested arrays or objects (chosen at random per level) around the value 1.
std::string nested(std::mt19937_64& rng, int depth) {
  std::string open, close;
  for (int i = 0; i < depth; ++i) {
    if (rng() % 2) {
      open += "[";
      close = "]" + close;
    } else {
      open += "{\"k" + std::to_string(i) + "\":";
      close = "}" + close;
    }
  }
  return open + "1" + close;
}

TEST(ParserLimits, NestingUpToTheLimitParsesAndDeeperIsRefusedWithTheColumn) {
  std::mt19937_64 rng(1);
  for (int seed = 0; seed < kSeeds; ++seed) {
    const int depth = 1 + static_cast<int>(rng() % (2 * detail::kMaxJsonDepth));
    const std::string text = nested(rng, depth);
    if (depth <= detail::kMaxJsonDepth) {
      EXPECT_EQ(detail::parse_json_strictly(text, "x"), json::parse(text)) << depth;
    } else {
      const size_t column = text.find_first_of("[{", 0);
      size_t at = column;
      for (int level = 0; level <= detail::kMaxJsonDepth; ++level) {
        at = text.find_first_of("[{", level == 0 ? at : at + 1);
      }
      expect_throw_with<InvalidArgument>(
          [&] { detail::parse_json_strictly(text, "x"); },
          {"x: JSON nested deeper than 256 levels at column " + std::to_string(at + 1)});
    }
  }
}

TEST(ParserLimits, DeepNestingEndsInOneShortErrorForEveryReader) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& line :
       {"{\"input_ids\":" + deep + "}", "{\"input_ids\":[1],\"x\":" + deep + "}", deep}) {
    const std::string message = parse_line_error(line);
    EXPECT_NE(message.find("deeper than 256"), std::string::npos) << message;
    EXPECT_LE(message.size(), kLongestMessage);
  }
  const std::string message = expect_throw_with<InvalidArgument>(
      [&] { parse_mock_config("{\"size\":" + deep + "}", "", "deep.json"); },
      {"mock dataset config 'deep.json': ", "deeper than 256"});
  EXPECT_LE(message.size(), kLongestMessage);
  // Brackets inside strings are text, not nesting.
  const std::string in_string = "{\"input_ids\":[1],\"note\":\"" + deep + "\\\"\"}";
  JsonlOptions options;
  options.ignore_unknown_keys = true;
  EXPECT_EQ(detail::parse_jsonl_line(in_string, 0, options, "x").input_ids,
            std::vector<int64_t>{1});
}

// A random object tree with distinct keys per object, as text.
json random_object(std::mt19937_64& rng, int depth) {
  json object = json::object();
  const int keys = 1 + static_cast<int>(rng() % 5);
  for (int k = 0; k < keys; ++k) {
    const std::string key = "k" + std::to_string(k) + std::string(rng() % 3, 'x');
    if (object.contains(key)) continue;
    object[key] = depth > 0 && rng() % 3 == 0 ? random_object(rng, depth - 1)
                                              : json(static_cast<int64_t>(rng() % 100));
  }
  return object;
}

TEST(ParserLimits, AKeyGivenTwiceInAnyObjectIsRefusedAndDistinctKeysParse) {
  std::mt19937_64 rng(2);
  for (int seed = 0; seed < kSeeds; ++seed) {
    const json tree = random_object(rng, 3);
    const std::string text = tree.dump();
    EXPECT_EQ(detail::parse_json_strictly(text, "x"), tree);
    // Repeat one key of one object (found by position in the text) with another value; an escaped
    // spelling of the key is the same key.
    std::vector<size_t> key_starts;
    for (size_t i = 0; i + 1 < text.size(); ++i) {
      if ((text[i] == '{' || text[i] == ',') && text[i + 1] == '"') key_starts.push_back(i + 1);
    }
    const size_t at = key_starts[rng() % key_starts.size()];
    const size_t end = text.find('"', at + 1);
    std::string key = text.substr(at, end - at + 1);
    if (rng() % 2) key.replace(1, 1, "\\u006b");  // \u006b is 'k'
    const std::string twice = text.substr(0, at) + key + ":0," + text.substr(at);
    expect_throw_with<InvalidArgument>([&] { detail::parse_json_strictly(twice, "x"); },
                                       {"x: key \"", "given twice"});
  }
  expect_throw_with<InvalidArgument>(
      [] { detail::parse_jsonl_line(R"({"input_ids":[1,2],"input_ids":[3]})", 0, {}, "d:1"); },
      "d:1: key \"input_ids\" given twice");
  expect_throw_with<InvalidArgument>(
      [] {
        parse_mock_config(R"({"type":"uniform","min_seq_len":1,"max_seq_len":4,"max_seq_len":2})",
                          "", "c.json");
      },
      "mock dataset config 'c.json': key \"max_seq_len\" given twice");
}

TEST(ParserLimits, ANulByteAnywhereIsRefusedWithItsColumn) {
  const std::string line = R"({"input_ids":[1,22,333],"loss_mask":[0,1,1]})";
  const std::string config =
      R"({"type":"lognormal","min_seq_len":1,"max_seq_len":9,"mean_seq_len":4,"lognormal_sigma":1})";
  std::mt19937_64 rng(3);
  for (int seed = 0; seed < kSeeds; ++seed) {
    const size_t at = rng() % (line.size() + 1);
    const std::string bad = line.substr(0, at) + '\0' + line.substr(at);
    const std::string message = parse_line_error(bad);
    EXPECT_NE(message.find("NUL byte at column " + std::to_string(at + 1)), std::string::npos)
        << message;
    const size_t config_at = rng() % (config.size() + 1);
    expect_throw_with<InvalidArgument>(
        [&] {
          parse_mock_config(config.substr(0, config_at) + '\0' + config.substr(config_at), "",
                            "c.json");
        },
        "mock dataset config 'c.json': NUL byte at column " + std::to_string(config_at + 1));
  }
}

TEST(ParserLimits, AByteOrderMarkNeverLosesTheFirstValue) {
  std::mt19937_64 rng(4);
  for (int seed = 0; seed < kSeeds; ++seed) {
    std::vector<int64_t> lengths(1 + rng() % 20);
    for (auto& l : lengths) l = 1 + static_cast<int64_t>(rng() % 100000);
    std::string text = kBom;
    if (rng() % 2) text += "seq_len\n";
    for (int64_t l : lengths) text += std::to_string(l) + (rng() % 2 ? "\r\n" : "\n");
    std::istringstream in(text);
    EXPECT_EQ(detail::parse_lengths(in, "l.txt"), lengths) << seed;
  }
  TempDir dir;
  const std::string jsonl = dir.write("bom.jsonl", kBom + "{\"input_ids\":[5,6]}\n{\"input_ids\":[7]}\n");
  const auto d = load_jsonl_dataset(jsonl);
  ASSERT_EQ(d->size(), 2);
  EXPECT_EQ(d->sample(0).input_ids, (std::vector<int64_t>{5, 6}));
  const MockConfig c = parse_mock_config(kBom + R"({"type":"uniform","min_seq_len":3,"max_seq_len":5})");
  EXPECT_EQ(c.min_seq_len, 3);
  EXPECT_EQ(read_lengths_file(dir.write("l.txt", kBom + "17\n18\n")), (std::vector<int64_t>{17, 18}));
}

TEST(ParserLimits, MessagesQuoteAShortExcerptOfLongValues) {
  std::mt19937_64 rng(5);
  for (int seed = 0; seed < 40; ++seed) {
    const size_t n = 100 + rng() % 200000;
    const std::string big(n, static_cast<char>('a' + rng() % 26));
    std::string big_number(n / 2 + 1, '1');
    big_number.append(".5");
    const std::vector<std::string> lines = {
        "{\"input_ids\":[1,\"" + big + "\"]}",          // wrong element type
        "{\"input_ids\":[1],\"" + big + "\":1}",        // unknown key
        "{\"input_ids\":[1],\"loss_mask\":[" + big_number + "]}",  // bad mask value
        "{\"input_ids\":[" + big_number + "]}",                  // float token id
        "{\"input_ids\":[1,\"" + big,                            // unterminated string
        "{\"input_ids\":[1]," + big + "}",                       // invalid literal
    };
    for (const std::string& line : lines) {
      const std::string message = parse_line_error(line);
      EXPECT_LE(message.size(), kLongestMessage) << message.substr(0, 200);
    }
    const std::string config_message = expect_throw_with<InvalidArgument>(
        [&] { parse_mock_config("{\"type\":\"" + big + "\"}", "", "c.json"); },
        "mock dataset config 'c.json'");
    EXPECT_LE(config_message.size(), kLongestMessage);
    std::istringstream lengths("12\n" + big + "\n");
    const std::string lengths_message = expect_throw_with<InvalidArgument>(
        [&] { detail::parse_lengths(lengths, "l.txt"); }, "l.txt:2: ");
    EXPECT_LE(lengths_message.size(), kLongestMessage);
  }
  // An excerpt never ends inside a UTF-8 character.
  const std::string cut = detail::excerpt(std::string(79, 'a') + "\xC3\xA9" + "b");
  EXPECT_EQ(cut, std::string(79, 'a') + "\xE2\x80\xA6");
}

TEST(ParserLimits, TokenIdsWithAFractionOrExponentAreRefusedNotTruncated) {
  for (const std::string number : {"1.9", "1.0", "1e2", "1E0", "-0.0", "0.5", "2.0e0"}) {
    for (const std::string key : {"input_ids", "labels"}) {
      const std::string line = key == "input_ids"
                                   ? "{\"input_ids\":[3," + number + "]}"
                                   : "{\"input_ids\":[3,4],\"labels\":[3," + number + "]}";
      const std::string message = parse_line_error(line);
      // The value as JSON writes it back (1e2 is 100.0).
      EXPECT_NE(message.find("\"" + key + "\"[1] must be an integer, got "), std::string::npos)
          << message;
    }
  }
}

TEST(ParserLimits, MockConfigErrorsNameTheirFile) {
  for (const std::string bad : {R"({"type":"uniform","min_seq_len":1})",
                                 R"({"type":"uniform","min_seq_len":1,"max_seq_len":2,"x":1})",
                                 R"({"type":"uniform","min_seq_len":5,"max_seq_len":2})",
                                 R"({"size":0,"type":"uniform","min_seq_len":1,"max_seq_len":2})",
                                 R"({"mode":"other"})", R"({"type":"zipf"})", R"([1])", R"({)",
                                 R"({"seed":-1,"type":"uniform","min_seq_len":1,"max_seq_len":2})",
                                 R"({"min_seq_len":"1"})"}) {
    const std::string message = expect_throw_with<InvalidArgument>(
        [&] { parse_mock_config(bad, "", "/configs/mock.json"); },
        "mock dataset config '/configs/mock.json'");
    // Without a file, the messages say what they said before.
    const std::string inline_message = expect_throw_with<InvalidArgument>(
        [&] { parse_mock_config(bad); }, "mock dataset config");
    EXPECT_EQ(inline_message.find("'/configs/"), std::string::npos);
  }
}

}  // namespace
}  // namespace thdpack
