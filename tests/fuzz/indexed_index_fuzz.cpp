// Fuzz target: the Megatron .idx parser (detail::parse_index and check_data_size, what
// IndexedDataset::open runs on the mapped files) and the token decoder of .bin. The input is an
// .idx, optionally followed by its .bin: the whole input is parsed as an index, and the input is
// also split where the header's counts say the index ends (with and without one mode byte per
// sequence). InvalidArgument is an expected outcome; anything else is a finding.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "data/readers.hpp"
#include "fuzz_check.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"

namespace {

using thdpack::fuzz::expect_accepted;
using thdpack::fuzz::expect_rejected;
using Bytes = std::span<const std::byte>;

constexpr int64_t kMaxDecodedBytes = int64_t{1} << 20;

void check(Bytes idx, Bytes bin) {
  thdpack::detail::IndexContents c;
  try {
    c = thdpack::detail::parse_index(idx, "fuzz.idx", "fuzz.bin");
  } catch (const thdpack::InvalidArgument&) {
    return;
  }
  // What was accepted is a well-formed index.
  const auto n = static_cast<int64_t>(c.lengths.size());
  const int64_t item = thdpack::token_size(c.dtype);
  FUZZ_CHECK(item > 0);
  int64_t end = 0;
  for (int32_t len : c.lengths) {
    FUZZ_CHECK(len >= 1);
    end += len * item;
  }
  FUZZ_CHECK(end == c.data_bytes);
  FUZZ_CHECK(!c.document_indices.empty());
  FUZZ_CHECK(c.document_indices.front() == 0 && c.document_indices.back() == n);
  for (size_t j = 1; j < c.document_indices.size(); ++j) {
    FUZZ_CHECK(c.document_indices[j - 1] <= c.document_indices[j]);
  }
  FUZZ_CHECK(c.pointers_at == 34 + 4 * n);
  // A .bin of exactly the size the index covers, and no other, matches it.
  expect_accepted(
      [&] { thdpack::detail::check_data_size(c, c.data_bytes, "fuzz.idx", "fuzz.bin"); },
      "a .bin of the size the index covers");
  if (c.data_bytes > 0) {
    expect_rejected(
        [&] { thdpack::detail::check_data_size(c, c.data_bytes - 1, "fuzz.idx", "fuzz.bin"); },
        "a .bin one byte short");
  }
  expect_rejected(
      [&] { thdpack::detail::check_data_size(c, c.data_bytes + 1, "fuzz.idx", "fuzz.bin"); },
      "a .bin one byte long");
  if (static_cast<int64_t>(bin.size()) != c.data_bytes) {
    expect_rejected(
        [&] {
          thdpack::detail::check_data_size(c, static_cast<int64_t>(bin.size()), "fuzz.idx",
                                           "fuzz.bin");
        },
        "a .bin of another size");
  }
  // Decode every token: the given .bin when it fits, else one made of its bytes over and over.
  if (c.data_bytes > kMaxDecodedBytes) return;
  std::vector<std::byte> buffer;
  const std::byte* data = bin.data();
  if (static_cast<int64_t>(bin.size()) != c.data_bytes) {
    buffer.assign(static_cast<size_t>(c.data_bytes), std::byte{0});
    for (size_t i = 0; !bin.empty() && i < buffer.size(); ++i) buffer[i] = bin[i % bin.size()];
    data = buffer.data();
  }
  const bool floating =
      c.dtype == thdpack::TokenDType::kFloat32 || c.dtype == thdpack::TokenDType::kFloat64;
  int64_t at = 0;
  std::vector<int64_t> tokens;
  for (int32_t len : c.lengths) {
    tokens.assign(static_cast<size_t>(len), 0);
    const int64_t bad = thdpack::detail::decode_tokens(data + at, c.dtype, tokens);
    FUZZ_CHECK(bad == -1 || (floating && bad >= 0 && bad < len));
    at += len * item;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes input(reinterpret_cast<const std::byte*>(data), size);
  check(input, {});
  if (size < 34) return 0;
  uint64_t sequences = 0, documents = 0;
  std::memcpy(&sequences, data + 18, 8);
  std::memcpy(&documents, data + 26, 8);
  if (sequences > size / 12 || documents > size / 8) return 0;
  const size_t base = 34 + 12 * sequences + 8 * documents;
  if (base <= size) check(input.first(base), input.subspan(base));
  if (sequences > 0 && base + sequences <= size) {
    check(input.first(base + sequences), input.subspan(base + sequences));
  }
  return 0;
}
