#pragma once
// Megatron indexed datasets built byte by byte in tests, independently of thdpack's writer:
// MegatronIndex lays out an .idx field by field as Megatron-LM's writer does, and its members can
// be set to anything (a wrong magic, a count that does not fit) to build damaged files.

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace thdpack::testing {

static_assert(std::endian::native == std::endian::little, "Megatron files are little-endian");

/// Appends the bytes of `v` (little-endian) to `out`.
template <typename T>
void put(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

/// Overwrites sizeof(T) bytes of `bytes` at `at` with `v`.
template <typename T>
void patch(std::string& bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

/// Byte offsets of the .idx fields (Megatron's layout).
constexpr size_t kMagicAt = 0, kVersionAt = 9, kDtypeAt = 17, kSequenceCountAt = 18,
                 kDocumentCountAt = 26, kLengthsAt = 34;
inline size_t pointers_at(size_t sequences) {
  return kLengthsAt + 4 * sequences;
}
inline size_t documents_at(size_t sequences) {
  return kLengthsAt + 12 * sequences;
}

struct MegatronIndex {
  std::string magic = std::string("MMIDIDX\0\0", 9);
  uint64_t version = 1;
  uint8_t dtype_code = 4;
  std::optional<uint64_t> sequence_count;  ///< default: lengths.size()
  std::optional<uint64_t> document_count;  ///< default: document_indices.size()
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers;
  std::vector<int64_t> document_indices;
  std::vector<int8_t> modes;  ///< multimodal files only

  /// A well-formed index: pointers are the running byte offsets, one document per sequence.
  static MegatronIndex of(std::vector<int32_t> lengths, uint8_t dtype_code, int64_t token_bytes) {
    MegatronIndex idx;
    idx.dtype_code = dtype_code;
    idx.lengths = std::move(lengths);
    int64_t at = 0;
    idx.document_indices.push_back(0);
    for (size_t i = 0; i < idx.lengths.size(); ++i) {
      idx.pointers.push_back(at);
      at += idx.lengths[i] * token_bytes;
      idx.document_indices.push_back(static_cast<int64_t>(i) + 1);
    }
    return idx;
  }

  std::string bytes() const {
    std::string out = magic;
    put(out, version);
    put(out, dtype_code);
    put(out, sequence_count.value_or(lengths.size()));
    put(out, document_count.value_or(document_indices.size()));
    for (int32_t v : lengths) put(out, v);
    for (int64_t v : pointers) put(out, v);
    for (int64_t v : document_indices) put(out, v);
    for (int8_t v : modes) put(out, v);
    return out;
  }
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// An index thdpack wrote, without the seal it ends with (indexed_dataset.hpp): Megatron's bytes.
/// Fails the test when there is no seal.
inline std::string without_seal(const std::string& idx) {
  constexpr size_t kSeal = 24;
  if (idx.size() < kSeal || idx.compare(idx.size() - kSeal, 8, "THDPSEAL") != 0) {
    ADD_FAILURE() << "the index does not end with a seal";
    return idx;
  }
  return idx.substr(0, idx.size() - kSeal);
}

}  // namespace thdpack::testing
