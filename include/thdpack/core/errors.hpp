#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Error types thrown by every thdpack entry point.
//
// Contract: public functions validate their input once, at the boundary, and throw one of these.
// Messages say what was wrong and how to fix it. Nothing in thdpack aborts on user input.

#include <concepts>
#include <sstream>
#include <stdexcept>
#include <string>

namespace thdpack {

/// Base of every error thdpack throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad input or configuration: lengths, options, files, topology sizes.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A collective failed or a peer went away. The message names the operation.
class CommError : public Error {
 public:
  using Error::Error;
};

/// A broken internal invariant (a bug in thdpack, never a user mistake).
class InternalError : public Error {
 public:
  using Error::Error;
};

/// The message of `parts`, each written as an ostream writes it: strings as they are, integers in
/// decimal, floating-point numbers to 6 significant digits.
/// message("sample ", id, " has ", n, " tokens") == "sample 17 has 40960 tokens".
template <class... Parts>
std::string message(const Parts&... parts) {
  std::ostringstream out;
  ((out << parts), ...);
  return out.str();
}

/// Throws E (InvalidArgument unless given) with message(parts...): the one way thdpack builds an
/// error's text from values. `fail<InternalError>("pack ", p, " is empty")`.
template <class E = InvalidArgument, class... Parts>
requires std::derived_from<E, Error>
[[noreturn]] void fail(const Parts&... parts) {
  throw E(message(parts...));
}

/// Throws E with message(parts...) unless `condition` holds. The parts are only turned into text
/// on failure. `check(m >= 1, "max_seqlen_per_dp_cp_rank must be >= 1, not ", m)`.
template <class E = InvalidArgument, class... Parts>
requires std::derived_from<E, Error>
void check(bool condition, const Parts&... parts) {
  if (!condition) fail<E>(parts...);
}

}  // namespace thdpack
