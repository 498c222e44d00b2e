#pragma once
// Checks on the values of command-line flags, attached where each flag is declared
// (`->check(positive_integer())`). They run on the text the user typed, before CLI11 converts it,
// so "", "abc", "1.5", "nan" and out-of-range numbers are refused with one line naming the flag
// instead of being converted, clamped or read as "not given". A failed check is a CLI11
// ValidationError: main() prints it as one line and exits 2.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>

namespace thdpack::cli {

/// Longest --timeout taken, in seconds (about 11 days): beyond it a wait is a hang, not a timeout.
constexpr double kMaxTimeoutSeconds = 1e6;

/// Most --steps taken (plan, run): ten million global batches already take hours; a larger count
/// is a typo or an overflow, refused up front instead of running for years.
constexpr int64_t kMaxSteps = 10'000'000;

/// A whole number in [1, maximum], written in decimal digits (a leading '+' allowed).
CLI::Validator positive_integer(int64_t maximum = std::numeric_limits<int64_t>::max());

/// A whole number in [0, maximum].
CLI::Validator non_negative_integer(int64_t maximum = std::numeric_limits<int64_t>::max());

/// Any whole number that fits in int64 (token ids, labels).
CLI::Validator any_integer();

/// A finite number in (0, maximum].
CLI::Validator positive_number(double maximum);

/// A finite number in [0, maximum].
CLI::Validator non_negative_number(double maximum);

/// Any text but the empty one (paths, names): an empty value is refused instead of being read as
/// "flag not given".
CLI::Validator non_empty();

}  // namespace thdpack::cli
