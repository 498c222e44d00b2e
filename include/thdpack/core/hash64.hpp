#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// XXH64 (Yann Collet's xxHash, 64-bit variant), streaming: thdpack's one digest, of pack files and
// their sources, of plans and gathered batches the ranks compare, of the options and data the CLI's
// ranks agree on. Fast (8 bytes per multiply) and with full avalanche, so one flipped bit anywhere
// changes the digest; not a cryptographic hash.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace thdpack {

class Hash64 {
 public:
  explicit Hash64(uint64_t seed = 0)
      : v_{seed + kP1 + kP2, seed + kP2, seed, seed - kP1}, seed_(seed) {}

  /// Hashes `n` more bytes.
  Hash64& update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    if (buffered_ + n < 32) {
      if (n > 0) std::memcpy(buffer_ + buffered_, p, n);
      buffered_ += n;
      return *this;
    }
    if (buffered_ > 0) {
      const size_t fill = 32 - buffered_;
      std::memcpy(buffer_ + buffered_, p, fill);
      stripe(buffer_);
      p += fill;
      n -= fill;
      buffered_ = 0;
    }
    for (; n >= 32; p += 32, n -= 32) stripe(p);
    if (n > 0) std::memcpy(buffer_, p, n);
    buffered_ = n;
    return *this;
  }

  /// The digest of every byte so far (the state is unchanged: more bytes may follow).
  uint64_t digest() const {
    uint64_t h;
    if (total_ >= 32) {
      h = rotl(v_[0], 1) + rotl(v_[1], 7) + rotl(v_[2], 12) + rotl(v_[3], 18);
      for (uint64_t v : v_) h = (h ^ round(0, v)) * kP1 + kP4;
    } else {
      h = seed_ + kP5;
    }
    h += total_;
    const unsigned char* p = buffer_;
    size_t n = buffered_;
    for (; n >= 8; p += 8, n -= 8) h = rotl(h ^ round(0, load<uint64_t>(p)), 27) * kP1 + kP4;
    if (n >= 4) {
      h = rotl(h ^ (load<uint32_t>(p) * kP1), 23) * kP2 + kP3;
      p += 4;
      n -= 4;
    }
    for (; n > 0; ++p, --n) h = rotl(h ^ (*p * kP5), 11) * kP1;
    h ^= h >> 33;
    h *= kP2;
    h ^= h >> 29;
    h *= kP3;
    h ^= h >> 32;
    return h;
  }

  /// Hashes the bytes of `value` (a number, or any trivially copyable value).
  template <class T>
  Hash64& add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    return update(&value, sizeof value);
  }
  /// Hashes the count of `values`, then their bytes: spans of different lengths never collide by
  /// concatenation.
  template <class T>
  Hash64& add_all(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    add(static_cast<uint64_t>(values.size()));
    return update(values.data(), values.size_bytes());
  }

  /// XXH64 of one buffer.
  static uint64_t of(const void* data, size_t n, uint64_t seed = 0) {
    return Hash64(seed).update(data, n).digest();
  }

 private:
  static constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
  static constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
  static constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
  static constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
  static constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t round(uint64_t acc, uint64_t input) { return rotl(acc + input * kP2, 31) * kP1; }
  template <typename T>
  static T load(const unsigned char* p) {  // little-endian hosts, as the file formats
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
  void stripe(const unsigned char* p) {
    for (int i = 0; i < 4; ++i) v_[i] = round(v_[i], load<uint64_t>(p + 8 * i));
  }

  uint64_t v_[4];
  uint64_t seed_;
  uint64_t total_ = 0;
  unsigned char buffer_[32] = {};
  size_t buffered_ = 0;
};

}  // namespace thdpack
