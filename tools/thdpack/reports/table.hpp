#pragma once
// A plain-text table: a header row and aligned columns (first column and text columns left, the
// rest right).

#include <ostream>
#include <string>
#include <vector>

namespace thdpack::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  /// Left-aligns column `column` (for text; numbers stay right-aligned).
  void left_align(size_t column) { left_.push_back(column); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> left_{0};
};

/// Fixed-point formatting: fixed(1.23456, 2) == "1.23".
std::string fixed(double value, int decimals);
/// A count or rate in at most three significant figures and a unit prefix: "1.23M", "45.6k",
/// "812", "2.5G", "0.5" (never "0.00M" for a small one; short enough for an axis tick).
std::string scaled(double value);
/// A fraction as a percentage: percent(0.1234, 1) == "12.3%".
std::string percent(double fraction, int decimals);

}  // namespace thdpack::cli
