// The one way errors are built: message() writes every part as text, fail() throws it as the
// requested error type, check() throws only when its condition fails.

#include "thdpack/core/errors.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace thdpack {
namespace {

TEST(ErrorMessage, WritesEveryPartAsText) {
  const int64_t id = 17;
  const std::string flag = "--max-seqlen-per-dp-cp-rank";
  EXPECT_EQ(message("sample ", id, " has ", 40960, " tokens; raise ", flag),
            "sample 17 has 40960 tokens; raise --max-seqlen-per-dp-cp-rank");
  EXPECT_EQ(message("fill ", 0.25, ", ratio ", 1.5e30), "fill 0.25, ratio 1.5e+30");
  EXPECT_EQ(message(), "");
}

TEST(ErrorMessage, FailThrowsTheRequestedTypeAndCheckOnlyOnFailure) {
  try {
    fail<InternalError>("pack ", 3, " is empty");
    FAIL() << "fail returned";
  } catch (const InternalError& e) {
    EXPECT_EQ(std::string(e.what()), "pack 3 is empty");
  }
  EXPECT_THROW(fail("bad"), InvalidArgument);
  EXPECT_NO_THROW(check(true, "never ", 1));
  try {
    check(2 < 1, "M must be >= ", 1, ", not ", 0);
    FAIL() << "check passed a false condition";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "M must be >= 1, not 0");
  }
  EXPECT_THROW(check<CommError>(false, "allgather failed"), CommError);
}

}  // namespace
}  // namespace thdpack
