// XXH64 (src/core/hash64.hpp): the published test values, and streaming in any split equals one
// call.

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "thdpack/core/hash64.hpp"

namespace thdpack::detail {
namespace {

TEST(Hash64, PublishedValues) {
  EXPECT_EQ(Hash64::of("", 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(Hash64::of("a", 1), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(Hash64::of("abc", 3), 0x44BC2CF5AD770999ull);
}

TEST(Hash64, StreamingInAnySplitEqualsOneCall) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(rng() % 300, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    Hash64 h;
    for (size_t at = 0; at < bytes.size();) {
      const size_t n = std::min<size_t>(bytes.size() - at, rng() % 40);
      h.update(bytes.data() + at, n);
      at += n;
    }
    EXPECT_EQ(h.digest(), Hash64::of(bytes.data(), bytes.size())) << bytes.size();
    // Each single-bit flip changes the digest.
    if (!bytes.empty()) {
      std::string flipped = bytes;
      flipped[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
      EXPECT_NE(Hash64::of(flipped.data(), flipped.size()), Hash64::of(bytes.data(), bytes.size()));
    }
  }
}

}  // namespace
}  // namespace thdpack::detail
