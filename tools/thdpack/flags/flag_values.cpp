#include "flags/flag_values.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include "thdpack/core/errors.hpp"

namespace thdpack::cli {
namespace {

// The value as quoted in a message: at most 40 characters, so a pasted file never floods stderr.
std::string excerpt(const std::string& value) {
  constexpr size_t kMax = 40;
  return "'" + (value.size() <= kMax ? value : value.substr(0, kMax) + "...") + "'";
}

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Parses the whole of `text` as a decimal integer; false when it is not one or does not fit.
bool parse_integer(const std::string& text, int64_t& value) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;
  if (first == last || *first == '+') return false;
  const auto [end, error] = std::from_chars(first, last, value);
  return error == std::errc() && end == last;
}

// Parses the whole of `text` as a number (decimal, exponent allowed); false otherwise.
bool parse_number(const std::string& text, double& value) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

CLI::Validator integer_in(int64_t minimum, int64_t maximum, const std::string& what) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        int64_t value = 0;
        if (!parse_integer(text, value) || value < minimum || value > maximum) {
          return message("must be ", what, " (", minimum, " to ", maximum, "), got ",
                         excerpt(text));
        }
        return {};
      },
      minimum > 0 ? "INT>=1" : (minimum == 0 ? "INT>=0" : "INT"));
}

CLI::Validator number_in(bool allow_zero, double maximum, const std::string& what) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        if (!parse_number(text, value) || !std::isfinite(value) || value < 0 ||
            (value == 0 && !allow_zero) || value > maximum) {
          return "must be " + what + " (at most " + number_text(maximum) + "), got " +
                 excerpt(text);
        }
        return {};
      },
      allow_zero ? "NUM>=0" : "NUM>0");
}

}  // namespace

CLI::Validator positive_integer(int64_t maximum) {
  return integer_in(1, maximum, "a positive whole number");
}

CLI::Validator any_integer() {
  return integer_in(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                    "a whole number");
}

CLI::Validator non_negative_integer(int64_t maximum) {
  return integer_in(0, maximum, "a non-negative whole number");
}

CLI::Validator positive_number(double maximum) {
  return number_in(false, maximum, "a finite number > 0");
}

CLI::Validator non_negative_number(double maximum) {
  return number_in(true, maximum, "a finite number >= 0");
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? "must not be empty (give a value or leave the flag out)" : "";
      },
      "");
}

}  // namespace thdpack::cli
