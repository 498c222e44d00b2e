#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "data/indexed_pair.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/output_file.hpp"

namespace thdpack {
namespace {

template <typename T>
void append_as(std::vector<std::byte>& out, std::span<const int64_t> tokens, TokenDType dtype) {
  const size_t at = out.size();
  out.resize(at + tokens.size() * sizeof(T));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t v = tokens[i];
    if constexpr (std::is_integral_v<T>) {
      if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (v > 0 &&
           static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
        fail("token ", v, " does not fit dtype ", token_dtype_name(dtype));
      }
    }
    const T t = static_cast<T>(v);
    if constexpr (std::is_floating_point_v<T>) {
      // Beyond 2^24 (float32) or 2^53 (float64) not every integer has a float: reading the token
      // back would give another one.
      constexpr T kLimit = static_cast<T>(9223372036854775808.0);
      if (!(t >= -kLimit && t < kLimit) || static_cast<int64_t>(t) != v) {
        fail("token ", v, " has no exact value in dtype ", token_dtype_name(dtype));
      }
    }
    std::memcpy(out.data() + at + i * sizeof(T), &t, sizeof(T));
  }
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, TokenDType dtype)
    : prefix_(prefix), dtype_(dtype) {
  if (token_size(dtype) == 0) throw InvalidArgument("unknown token dtype");
  refuse_replacing_inputs({prefix + ".bin", prefix + ".idx"});
  bin_ = std::make_unique<OutputFile>(prefix + ".bin");
  lock_ = std::make_unique<detail::PrefixLock>(prefix);
}

IndexedDatasetWriter::~IndexedDatasetWriter() = default;

void IndexedDatasetWriter::require_open(const char* call) const {
  if (finished_) {
    fail(std::string(call), " after finish(): '", prefix_,
         "' is complete; open a new IndexedDatasetWriter to write more");
  }
  if (!bin_) {
    fail(std::string(call), " after a failed finish(): '", prefix_,
         "' was not written; open a new IndexedDatasetWriter");
  }
}

void IndexedDatasetWriter::add_sequence(std::span<const int64_t> tokens) {
  require_open("add_sequence");
  if (tokens.empty()) throw InvalidArgument("an indexed dataset sequence needs at least one token");
  const auto negative = std::find_if(tokens.begin(), tokens.end(), [](int64_t t) { return t < 0; });
  check(negative == tokens.end(), "token ", negative - tokens.begin(), " of the sequence is ",
        negative == tokens.end() ? 0 : *negative, "; token ids are >= 0");
  check(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "sequence of ",
        tokens.size(), " tokens exceeds the index's int32 lengths");
  std::vector<std::byte> bytes;
  switch (dtype_) {
    case TokenDType::kUint8:
      append_as<uint8_t>(bytes, tokens, dtype_);
      break;
    case TokenDType::kInt8:
      append_as<int8_t>(bytes, tokens, dtype_);
      break;
    case TokenDType::kInt16:
      append_as<int16_t>(bytes, tokens, dtype_);
      break;
    case TokenDType::kUint16:
      append_as<uint16_t>(bytes, tokens, dtype_);
      break;
    case TokenDType::kInt32:
      append_as<int32_t>(bytes, tokens, dtype_);
      break;
    case TokenDType::kInt64:
      append_as<int64_t>(bytes, tokens, dtype_);
      break;
    case TokenDType::kFloat32:
      append_as<float>(bytes, tokens, dtype_);
      break;
    case TokenDType::kFloat64:
      append_as<double>(bytes, tokens, dtype_);
      break;
  }
  if (holes_) {
    if (std::fseek(bin_->stream(), bin_bytes_, SEEK_SET) != 0) {
      fail("cannot seek in '", prefix_, ".bin'");
    }
  }
  bin_->write(bytes.data(), bytes.size());
  bin_bytes_ += static_cast<int64_t>(bytes.size());
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
}

void IndexedDatasetWriter::add_length_only(int64_t length) {
  require_open("add_length_only");
  check(length >= 1 && length <= std::numeric_limits<int32_t>::max(), "sequence length ", length,
        " is outside [1, 2^31) of the index's int32 lengths");
  holes_ = true;
  bin_bytes_ += length * token_size(dtype_);
  lengths_.push_back(static_cast<int32_t>(length));
}

void IndexedDatasetWriter::end_document() {
  require_open("end_document");
  document_indices_.push_back(static_cast<int64_t>(lengths_.size()));
}

void IndexedDatasetWriter::finish() {
  require_open("finish");
  try {
    write_and_commit();
  } catch (...) {
    bin_.reset();  // removes the temporary .bin; later calls report the failed finish
    lock_.reset();
    throw;
  }
  lock_.reset();  // the pair is in place: another writer may replace it now
  finished_ = true;
}

void IndexedDatasetWriter::write_and_commit() {
  const std::string bin_path = prefix_ + ".bin";
  if (std::fflush(bin_->stream()) != 0 || ::ftruncate(::fileno(bin_->stream()), bin_bytes_) != 0) {
    fail("cannot finish '", bin_path, "': ", std::strerror(errno));
  }
  // Without explicit documents, every sequence is its own document.
  std::vector<int64_t> documents = document_indices_;
  if (documents.size() == 1) {
    for (size_t i = 1; i <= lengths_.size(); ++i) documents.push_back(static_cast<int64_t>(i));
  } else if (documents.back() != static_cast<int64_t>(lengths_.size())) {
    documents.push_back(static_cast<int64_t>(lengths_.size()));
  }
  OutputFile idx(prefix_ + ".idx");
  const char magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
  const uint64_t version = 1;
  const auto code = static_cast<uint8_t>(dtype_);
  const uint64_t sequences = lengths_.size();
  const uint64_t document_count = documents.size();
  idx.write(magic, sizeof(magic));
  idx.write(&version, 8);
  idx.write(&code, 1);
  idx.write(&sequences, 8);
  idx.write(&document_count, 8);
  idx.write(lengths_.data(), lengths_.size() * 4);
  std::vector<int64_t> pointers(lengths_.size());
  int64_t at = 0;
  for (size_t i = 0; i < lengths_.size(); ++i) {
    pointers[i] = at;
    at += static_cast<int64_t>(lengths_[i]) * token_size(dtype_);
  }
  idx.write(pointers.data(), pointers.size() * 8);
  idx.write(documents.data(), documents.size() * 8);
  const int bin_fd = ::fileno(bin_->stream());
  const uint64_t fingerprint =
      detail::data_fingerprint(bin_bytes_, [&](int64_t offset, std::span<std::byte> buffer) {
        if (::pread(bin_fd, buffer.data(), buffer.size(), offset) !=
            static_cast<ssize_t>(buffer.size())) {
          fail("cannot read back '", bin_path, "' to seal its index: ", std::strerror(errno));
        }
      });
  const auto seal = detail::encode_seal({static_cast<uint64_t>(bin_bytes_), fingerprint});
  idx.write(seal.data(), seal.size());
  // Both files complete on disk before either moves into place; then .bin, then .idx, with the
  // old .bin put back when anything after its rename fails: a failure leaves the old pair or
  // the new one, never a data file beside an index that does not describe it.
  commit_pair(*bin_, idx);
  bin_.reset();
}

}  // namespace thdpack
