#pragma once
// A value cut short for an error message, so that a pasted file or a long option never floods the
// output: what the readers' and the ranks' messages quote.

#include <cstddef>
#include <string>
#include <string_view>

namespace thdpack::detail {

/// The bytes an excerpt keeps by default.
inline constexpr size_t kExcerptChars = 80;

/// At most `max_bytes` bytes of `text` ("…" appended when cut; never half a UTF-8 character).
inline std::string excerpt(std::string_view text, size_t max_bytes = kExcerptChars) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "\xE2\x80\xA6";
}

}  // namespace thdpack::detail
