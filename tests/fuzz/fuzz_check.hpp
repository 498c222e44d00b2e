#pragma once
// Checks inside fuzz targets. A failed check aborts, which libFuzzer (and the replay driver of the
// regular build) reports as a finding, with the input that caused it.

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "thdpack/core/errors.hpp"

#define FUZZ_CHECK(condition)                                                                  \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #condition, __FILE__, __LINE__); \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

namespace thdpack::fuzz {

/// Longest error message a reader may give: position, explanation and short excerpts of values
/// (never the whole offending value, which can be megabytes).
inline constexpr size_t kLongestMessage = 512;

/// `body` must not throw InvalidArgument (other exceptions escape and are findings anyway).
template <typename F>
void expect_accepted(F&& body, const char* what) {
  try {
    body();
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "fuzz check failed: %s threw: %s\n", what, e.what());
    std::abort();
  }
}

/// `body` must throw InvalidArgument.
template <typename F>
void expect_rejected(F&& body, const char* what) {
  try {
    body();
  } catch (const InvalidArgument&) {
    return;
  }
  std::fprintf(stderr, "fuzz check failed: %s was accepted\n", what);
  std::abort();
}

}  // namespace thdpack::fuzz
