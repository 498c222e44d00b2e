#pragma once
// JSON the CLI prints or writes for people and scripts to read (--json summaries, plan file
// heads). Text in it can come from the file system (a path in a folder named in Latin-1) and need
// not be UTF-8, which JSON cannot hold: such bytes become U+FFFD instead of failing the command.

#include <nlohmann/json.hpp>
#include <string>

namespace thdpack::cli {

template <typename Json>
std::string json_text(const Json& value, int indent = -1) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace thdpack::cli
