#include <cctype>
#include <charconv>

#include "data/json_text.hpp"
#include "data/readers.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/lengths_file.hpp"

namespace thdpack {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  return std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.';
}

}  // namespace

std::vector<int64_t> read_lengths_file(const std::string& path) {
  return detail::read_lengths(InputFile(path, "lengths file"));
}

std::vector<int64_t> detail::read_lengths(const InputFile& file) {
  InputStream in(file);
  return parse_lengths(in, file.path());
}

std::vector<int64_t> detail::parse_lengths(std::istream& in, const std::string& path) {
  std::vector<int64_t> lengths;
  std::string line;
  int64_t line_no = 0;
  bool seen_content = false;
  while (
      read_bounded_line(in, line, kMaxLengthsLineBytes, path + ":" + std::to_string(line_no + 1))) {
    ++line_no;
    // A BOM would make the first length look like a header line, and it would be dropped.
    const std::string value = trim(std::string(line_no == 1 ? detail::skip_utf8_bom(line) : line));
    if (value.empty()) continue;
    const bool first = !seen_content;
    seen_content = true;
    if (first && !looks_numeric(value)) continue;  // header line, e.g. "seq_len"
    int64_t length = 0;
    const char* begin = value.data();
    const char* end = begin + value.size();
    auto [ptr, ec] = std::from_chars(begin, end, length);
    const std::string where = path + ":" + std::to_string(line_no);
    if (ec == std::errc::result_out_of_range) {
      fail(where, ": length '", detail::excerpt(value), "' is out of range");
    }
    if (ec != std::errc() || ptr != end) {
      fail(where, ": expected one integer length per line, got '", detail::excerpt(value), "'");
    }
    if (length <= 0) {
      fail(where, ": length must be >= 1, got ", detail::excerpt(value));
    }
    lengths.push_back(length);
  }
  if (lengths.empty()) fail("lengths file '", path, "' holds no lengths");
  return lengths;
}

}  // namespace thdpack
