#include "thdpack/indexed_dataset.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "thdpack/errors.hpp"

namespace thdpack {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr int64_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

template <typename T>
T read_at(const std::byte* base, int64_t offset) {
  T value;
  std::memcpy(&value, base + offset, sizeof(T));
  return value;
}

}  // namespace

// A read-only memory map of a whole file.
struct IndexedDataset::Mapping {
  const std::byte* data = nullptr;
  int64_t size = 0;

  explicit Mapping(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw InvalidArgument("cannot open '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      throw InvalidArgument("cannot stat '" + path + "': " + std::strerror(errno));
    }
    size = static_cast<int64_t>(st.st_size);
    if (size > 0) {
      void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        throw InvalidArgument("cannot map '" + path + "': " + std::strerror(errno));
      }
      data = static_cast<const std::byte*>(p);
    }
    ::close(fd);
  }
  ~Mapping() {
    if (data != nullptr) ::munmap(const_cast<std::byte*>(data), static_cast<size_t>(size));
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
};

int token_size(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUint8:
    case TokenDType::kInt8:
      return 1;
    case TokenDType::kInt16:
    case TokenDType::kUint16:
      return 2;
    case TokenDType::kInt32:
    case TokenDType::kFloat32:
      return 4;
    case TokenDType::kInt64:
    case TokenDType::kFloat64:
      return 8;
  }
  return 0;
}

std::string token_dtype_name(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUint8:
      return "uint8";
    case TokenDType::kInt8:
      return "int8";
    case TokenDType::kInt16:
      return "int16";
    case TokenDType::kInt32:
      return "int32";
    case TokenDType::kInt64:
      return "int64";
    case TokenDType::kFloat64:
      return "float64";
    case TokenDType::kFloat32:
      return "float32";
    case TokenDType::kUint16:
      return "uint16";
  }
  return "?";
}

TokenDType token_dtype_from_name(const std::string& name) {
  for (int code = 1; code <= 8; ++code) {
    const auto d = static_cast<TokenDType>(code);
    if (token_dtype_name(d) == name) return d;
  }
  throw InvalidArgument("unknown token dtype '" + name +
                        "'; use uint8, int8, int16, uint16, int32, int64, float32 or float64");
}

std::unique_ptr<IndexedDataset> IndexedDataset::open(const std::string& prefix) {
  std::unique_ptr<IndexedDataset> d(new IndexedDataset());
  d->prefix_ = prefix;
  const std::string idx = prefix + ".idx";
  const std::string bin = prefix + ".bin";
  d->index_ = std::make_unique<Mapping>(idx);
  d->data_ = std::make_unique<Mapping>(bin);
  const std::byte* p = d->index_->data;
  const int64_t size = d->index_->size;
  auto bad = [&idx](int64_t at, const std::string& what) {
    throw InvalidArgument(idx + ": byte " + std::to_string(at) + ": " + what);
  };
  if (size < kHeaderBytes) {
    bad(0, "file of " + std::to_string(size) + " bytes is shorter than the " +
               std::to_string(kHeaderBytes) + "-byte header of an indexed dataset");
  }
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
    bad(0, "not a Megatron indexed dataset index (magic MMIDIDX\\0\\0 expected)");
  }
  const auto version = read_at<uint64_t>(p, 9);
  if (version != 1) bad(9, "unsupported version " + std::to_string(version) + " (expected 1)");
  const auto code = read_at<uint8_t>(p, 17);
  if (code < 1 || code > 8) bad(17, "unknown dtype code " + std::to_string(code));
  d->dtype_ = static_cast<TokenDType>(code);
  const auto sequences = read_at<uint64_t>(p, 18);
  const auto documents = read_at<uint64_t>(p, 26);
  // Sizes as unsigned arithmetic that cannot overflow for counts bounded by the file size.
  const auto body = static_cast<uint64_t>(size - kHeaderBytes);
  if (sequences > body / 12 || documents > body / 8) {
    bad(18, "sequence count " + std::to_string(sequences) + " and document count " +
                std::to_string(documents) + " do not fit a " + std::to_string(size) +
                "-byte index");
  }
  const uint64_t expected = 12 * sequences + 8 * documents;
  if (body != expected && body != expected + sequences) {
    bad(18, "the index holds " + std::to_string(body) + " bytes after its header, but " +
                std::to_string(sequences) + " sequences and " + std::to_string(documents) +
                " documents need " + std::to_string(expected) +
                " (or that plus one mode byte per sequence)");
  }
  const auto n = static_cast<int64_t>(sequences);
  d->lengths_.resize(static_cast<size_t>(n));
  if (n > 0) std::memcpy(d->lengths_.data(), p + kHeaderBytes, static_cast<size_t>(n) * 4);
  d->pointers_at_ = kHeaderBytes + 4 * n;
  const int64_t item = token_size(d->dtype_);
  int64_t expected_pointer = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t len = d->lengths_[static_cast<size_t>(i)];
    if (len <= 0) {
      bad(kHeaderBytes + 4 * i, "sequence " + std::to_string(i) + " has length " +
                                    std::to_string(len) + "; lengths must be >= 1");
    }
    const auto pointer = read_at<int64_t>(p, d->pointers_at_ + 8 * i);
    if (pointer != expected_pointer) {
      bad(d->pointers_at_ + 8 * i,
          "sequence " + std::to_string(i) + " points to byte " + std::to_string(pointer) + " of " +
              bin + ", but the lengths before it put it at " + std::to_string(expected_pointer));
    }
    expected_pointer += len * item;
    if (expected_pointer > d->data_->size) {
      bad(d->pointers_at_ + 8 * i,
          "sequence " + std::to_string(i) + " ends at byte " + std::to_string(expected_pointer) +
              " but " + bin + " has only " + std::to_string(d->data_->size) +
              " bytes (truncated data file, or an index of another dataset)");
    }
  }
  if (expected_pointer != d->data_->size) {
    throw InvalidArgument(bin + ": " + std::to_string(d->data_->size) + " bytes, but its index " +
                          idx + " accounts for " + std::to_string(expected_pointer) +
                          ": the index does not match this data file");
  }
  const int64_t docs_at = d->pointers_at_ + 8 * n;
  const auto m = static_cast<int64_t>(documents);
  d->document_indices_.resize(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    const auto v = read_at<int64_t>(p, docs_at + 8 * j);
    const int64_t previous = j == 0 ? -1 : d->document_indices_[static_cast<size_t>(j) - 1];
    if ((j == 0 && v != 0) || (j > 0 && v <= previous) || v > n) {
      bad(docs_at + 8 * j, "document index " + std::to_string(j) + " is " + std::to_string(v) +
                               "; document indices must rise from 0 to the sequence count " +
                               std::to_string(n));
    }
    d->document_indices_[static_cast<size_t>(j)] = v;
  }
  if (m > 0 && d->document_indices_.back() != n) {
    bad(docs_at + 8 * (m - 1), "the last document index is " +
                                   std::to_string(d->document_indices_.back()) +
                                   ", not the sequence count " + std::to_string(n));
  }
  return d;
}

IndexedDataset::~IndexedDataset() = default;

int64_t IndexedDataset::length(int64_t index) const {
  if (index < 0 || index >= size()) {
    throw InvalidArgument("sequence " + std::to_string(index) + " outside [0, " +
                          std::to_string(size()) + ") of " + prefix_);
  }
  return lengths_[static_cast<size_t>(index)];
}

int64_t IndexedDataset::pointer(int64_t index) const {
  length(index);  // range check
  return read_at<int64_t>(index_->data, pointers_at_ + 8 * index);
}

Sample IndexedDataset::sample(int64_t index) const {
  const int64_t len = length(index);
  const std::byte* at = data_->data + pointer(index);
  Sample s;
  s.id = index;
  s.input_ids.resize(static_cast<size_t>(len));
  auto convert = [&]<typename T>(T) {
    for (int64_t j = 0; j < len; ++j) {
      s.input_ids[static_cast<size_t>(j)] =
          static_cast<int64_t>(read_at<T>(at, j * static_cast<int64_t>(sizeof(T))));
    }
  };
  switch (dtype_) {
    case TokenDType::kUint8:
      convert(uint8_t{});
      break;
    case TokenDType::kInt8:
      convert(int8_t{});
      break;
    case TokenDType::kInt16:
      convert(int16_t{});
      break;
    case TokenDType::kUint16:
      convert(uint16_t{});
      break;
    case TokenDType::kInt32:
      convert(int32_t{});
      break;
    case TokenDType::kInt64:
      convert(int64_t{});
      break;
    case TokenDType::kFloat32:
      convert(float{});
      break;
    case TokenDType::kFloat64:
      convert(double{});
      break;
  }
  return s;
}

std::string IndexedDataset::describe() const {
  return "indexed " + prefix_ + " (" + std::to_string(size()) + " sequences, " +
         std::to_string(document_indices_.empty() ? 0 : document_indices_.size() - 1) +
         " documents, " + token_dtype_name(dtype_) + ")";
}

}  // namespace thdpack
