#pragma once
// Error types thrown by every thdpack entry point.
//
// Contract: public functions validate their input once, at the boundary, and throw one of these.
// Messages say what was wrong and how to fix it. Nothing in thdpack aborts on user input.

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

}  // namespace thdpack
