#pragma once
// The one strict JSON reader of the data files (JSONL lines, mock dataset configs), and the short
// excerpts their messages quote. nlohmann::json alone ends a text at a NUL byte without a word,
// keeps the last of two equal keys, and recurses without bound when a value is written back into a
// message; this reader refuses the first two and bounds the nesting, so every later dump() is
// shallow.

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/excerpt.hpp"  // excerpt(), which the readers' messages quote

namespace thdpack::detail {

/// Deepest nesting of arrays and objects a data file may use (the formats need 2).
inline constexpr int kMaxJsonDepth = 256;

/// `text` without a leading UTF-8 byte order mark (EF BB BF).
std::string_view skip_utf8_bom(std::string_view text);

/// Throws InvalidArgument (message as parse_json_strictly's) on a NUL byte or nesting deeper than
/// kMaxJsonDepth, outside strings, in one pass: both must be known before nlohmann sees the text
/// (it stops at a NUL as if the text ended there).
void check_json_bytes_and_depth(std::string_view text, const std::string& where);

/// Parses `text` as one JSON value; a leading UTF-8 BOM is skipped. Throws InvalidArgument, its
/// message starting with `where` ("file:line" or "mock dataset config 'file'"), on: a NUL byte
/// (with its column), nesting deeper than kMaxJsonDepth (with the column), a key given twice in
/// one object, or anything else that is not valid JSON (nlohmann's position, the text it read
/// shortened to an excerpt).
nlohmann::json parse_json_strictly(std::string_view text, const std::string& where);

/// excerpt() of `value` written as JSON.
std::string json_excerpt(const nlohmann::json& value);

}  // namespace thdpack::detail
