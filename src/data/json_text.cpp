#include "data/json_text.hpp"

#include <set>
#include <vector>

#include "thdpack/core/errors.hpp"

namespace thdpack::detail {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  thdpack::fail(where, ": ", what);
}

// nlohmann's message, with the text it read ("last read: '...'") cut to an excerpt.
std::string shortened(const std::string& message) {
  const std::string marker = "last read: '";
  const size_t at = message.find(marker);
  if (at == std::string::npos) return excerpt(message);
  std::string read = message.substr(at + marker.size());
  if (!read.empty() && read.back() == '\'') read.pop_back();
  return message.substr(0, at + marker.size()) + excerpt(read) + "'";
}

}  // namespace

void check_json_bytes_and_depth(std::string_view text, const std::string& where) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0') {
      fail(where, message("NUL byte at column ", i + 1,
                          " (a JSON text holds none; is the file binary or UTF-16?)"));
    }
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        fail(where,
             message("JSON nested deeper than ", kMaxJsonDepth, " levels at column ", i + 1));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

std::string_view skip_utf8_bom(std::string_view text) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  return text;
}

std::string json_excerpt(const json& value) {
  // Values come from parse_json_strictly, so dump() recurses at most kMaxJsonDepth deep; replace
  // keeps invalid UTF-8 from throwing while the message is written.
  return excerpt(value.dump(-1, ' ', false, json::error_handler_t::replace));
}

json parse_json_strictly(std::string_view text, const std::string& where) {
  text = skip_utf8_bom(text);
  check_json_bytes_and_depth(text, where);
  std::vector<std::set<std::string>> keys;  // the keys seen in each open object
  std::string last_key;                     // names the value a number overflow is in
  const json::parser_callback_t callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case json::parse_event_t::key:
        last_key = parsed.get<std::string>();
        if (!keys.back().insert(parsed.get<std::string>()).second) {
          fail(where, "key \"" + excerpt(parsed.get<std::string>()) +
                          "\" given twice in one object (JSON readers disagree on which wins)");
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::out_of_range& e) {  // a number such as 1e400
    fail(where, (last_key.empty() ? std::string("a number")
                                  : "the value of \"" + excerpt(last_key) + "\"") +
                    " does not fit a double (" + shortened(e.what()) + ")");
  } catch (const json::exception& e) {
    fail(where, "not valid JSON (" + shortened(e.what()) + ")");
  }
}

}  // namespace thdpack::detail
