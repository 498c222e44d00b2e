#include "reports/table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <utility>

namespace thdpack::cli {

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  };
  widen(header_);
  for (const auto& row : rows_) widen(row);
  auto line = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      if (c > 0) out << "  ";
      if (std::find(left_.begin(), left_.end(), c) != left_.end()) {
        out << std::left << std::setw(static_cast<int>(width[c])) << cell;
      } else {
        out << std::right << std::setw(static_cast<int>(width[c])) << cell;
      }
    }
    out << std::left << '\n';
  };
  line(header_);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out << std::string(total > 2 ? total - 2 : 0, '-') << '\n';
  for (const auto& row : rows_) line(row);
}

std::string percent(double fraction, int decimals) {
  return fixed(100 * fraction, decimals) + "%";
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

std::string scaled(double value) {
  static constexpr std::pair<double, const char*> kPrefixes[] = {
      {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  const char* suffix = "";
  for (const auto& [factor, prefix] : kPrefixes) {
    if (std::abs(value) >= factor) {
      value /= factor;
      suffix = prefix;
      break;
    }
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3g%s", value, suffix);
  return buffer;
}

}  // namespace thdpack::cli
