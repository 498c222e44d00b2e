#include "thdpack/data/indexed_dataset.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <sstream>
#include <thread>
#include <type_traits>

#include "data/readers.hpp"
#include "data/temporary_files.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/input_file.hpp"

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

// How long open() waits for a writer of the prefix to finish its commit.
constexpr auto kWaitForWriter = std::chrono::seconds(10);

// "; the previous data file a commit kept is 'F'" for each hidden backup of `bin` in its folder
// (OutputFile's commit_pair leaves one behind when the writer died between the two renames).
std::string kept_old_data_files(const std::string& bin) {
  const std::filesystem::path target(bin);
  const std::string start = detail::backup_name_start(target);
  std::string kept;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(detail::folder_of(target), ec)) {
    if (entry.path().filename().string().rfind(start, 0) == 0) {
      kept.append("; a previous data file is kept as '").append(entry.path().string()).append("'");
    }
  }
  return kept;
}

}  // namespace

// A read-only memory map of a whole file, leased as an input in use (OutputFile refuses to replace
// it). A mapped file that shrinks would turn reads past its new end into SIGBUS: sample() asks
// require_unchanged() first.
struct IndexedDataset::Mapping {
  const std::byte* data = nullptr;
  int64_t size = 0;
  std::string path;
  InputLease lease;  // holds the file open: the maps and size checks ask it, not the path

  explicit Mapping(const std::string& file) : path(file), lease(file, "indexed dataset file") {
    size = lease.file().size();
    if (size > 0) {
      void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE,
                       lease.file().descriptor(), 0);
      if (p == MAP_FAILED) {
        fail("cannot map '", path, "': ", std::strerror(errno));
      }
      data = static_cast<const std::byte*>(p);
    }
  }
  ~Mapping() {
    if (data != nullptr) ::munmap(const_cast<std::byte*>(data), static_cast<size_t>(size));
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  // True when the file at `path` is no longer the one mapped (it was replaced by a rename).
  bool replaced() const {
    struct stat now {};
    struct stat mapped {};
    if (::fstat(lease.file().descriptor(), &mapped) != 0) return false;
    if (::stat(path.c_str(), &now) != 0) return true;
    return now.st_dev != mapped.st_dev || now.st_ino != mapped.st_ino;
  }

  // Throws unless the mapped file still holds bytes [0, end). A file replaced under the same path
  // (another inode) leaves the mapped one intact; the same file cut shorter does not.
  void require_unchanged(int64_t end) const {
    struct stat st {};
    if (::fstat(lease.file().descriptor(), &st) != 0) return;
    if (static_cast<int64_t>(st.st_size) < std::min(end, size)) {
      fail(path, ": the file shrank from ", size, " to ", st.st_size,
           " bytes while open; it was changed under a running reader, open it again");
    }
  }
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
  fail("unknown token dtype '", name,
       "'; use uint8, int8, int16, uint16, int32, int64, float32 or float64");
}

namespace detail {

// The pointers of `c`'s lengths (read already) checked to be their running sum in bytes;
// returns the bytes of .bin they cover. `bad(at, what)` throws.
template <typename Bad>
int64_t check_lengths_and_pointers(const std::byte* p, const IndexContents& c,
                                   const std::string& bin_name, const Bad& bad) {
  const auto n = static_cast<int64_t>(c.lengths.size());
  const int64_t item = token_size(c.dtype);
  int64_t end = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t len = c.lengths[static_cast<size_t>(i)];
    if (len <= 0) {
      bad(kHeaderBytes + 4 * i,
          message("sequence ", i, " has length ", len, "; lengths must be >= 1"));
    }
    const auto pointer = read_at<int64_t>(p, c.pointers_at + 8 * i);
    if (pointer != end) {
      bad(c.pointers_at + 8 * i, message("sequence ", i, " points to byte ", pointer, " of ",
                                         bin_name, ", but the lengths before it put it at ", end));
    }
    // A sequence covers less than 2^34 bytes: the sum can only overflow past 2^29 sequences.
    if (len * item > std::numeric_limits<int64_t>::max() - end) {
      bad(kHeaderBytes + 4 * i,
          message("sequence ", i, " ends past byte 2^63: the lengths cannot all be right"));
    }
    end += len * item;
  }
  return end;
}

// `m` document indices at byte `at`: from 0, never decreasing (equal neighbours are an empty
// document, which Megatron's add_document writes for a record without tokens), ending at the
// sequence count `n`.
template <typename Bad>
std::vector<int64_t> read_document_indices(const std::byte* p, int64_t at, int64_t m, int64_t n,
                                           const Bad& bad) {
  std::vector<int64_t> indices(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    const auto v = read_at<int64_t>(p, at + 8 * j);
    const int64_t previous = j == 0 ? -1 : indices[static_cast<size_t>(j) - 1];
    if ((j == 0 && v != 0) || (j > 0 && v < previous) || v > n) {
      bad(at + 8 * j,
          message("document index ", j, " is ", v, j > 0 ? message(" after ", previous) : "",
                  "; document indices must not decrease and must run from 0 to "
                  "the sequence count ",
                  n));
    }
    indices[static_cast<size_t>(j)] = v;
  }
  if (indices.back() != n) {
    bad(at + 8 * (m - 1),
        message("the last document index is ", indices.back(), ", not the sequence count ", n));
  }
  return indices;
}

IndexContents parse_index(std::span<const std::byte> idx, const std::string& idx_name,
                          const std::string& bin_name) {
  const std::byte* p = idx.data();
  // A seal, if any, ends the index; the checks below are of what comes before it.
  const std::optional<IndexSeal> seal =
      idx.size() >= static_cast<size_t>(kHeaderBytes + kIndexSealBytes) ? find_seal(idx)
                                                                        : std::nullopt;
  const auto size = static_cast<int64_t>(idx.size()) - (seal ? kIndexSealBytes : 0);
  auto bad = [&idx_name](int64_t at, const std::string& what) {
    fail(idx_name, ": byte ", at, ": ", what);
  };
  if (size < kHeaderBytes) {
    bad(0, message("file of ", size, " bytes is shorter than the ", kHeaderBytes,
                   "-byte header of an indexed dataset"));
  }
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
    bad(0, "not a Megatron indexed dataset index (magic MMIDIDX\\0\\0 expected)");
  }
  const auto version = read_at<uint64_t>(p, 9);
  if (version != 1) bad(9, message("unsupported version ", version, " (expected 1)"));
  const auto code = read_at<uint8_t>(p, 17);
  // code is a uint8_t: std::to_string writes its number, an ostream would write it as a char.
  if (code < 1 || code > 8) bad(17, message("unknown dtype code ", std::to_string(code)));
  IndexContents c;
  c.dtype = static_cast<TokenDType>(code);
  c.seal = seal;
  const auto sequences = read_at<uint64_t>(p, 18);
  const auto documents = read_at<uint64_t>(p, 26);
  // Sizes as unsigned arithmetic that cannot overflow for counts bounded by the file size.
  const auto body = static_cast<uint64_t>(size - kHeaderBytes);
  if (sequences > body / 12 || documents > body / 8) {
    bad(18, message("sequence count ", sequences, " and document count ", documents,
                    " do not fit a ", size, "-byte index"));
  }
  const uint64_t expected = 12 * sequences + 8 * documents;
  if (body != expected && body != expected + sequences) {
    bad(18, message("the index holds ", body, " bytes after its header, but ", sequences,
                    " sequences and ", documents, " documents need ", expected,
                    " (or that plus one mode byte per sequence)"));
  }
  // Megatron always writes the leading 0, so even an index without sequences has one entry.
  if (documents == 0) {
    bad(26, message("document count 0; the document indices must run from 0 to the sequence count ",
                    sequences));
  }
  c.has_modes = sequences > 0 && body == expected + sequences;
  const auto n = static_cast<int64_t>(sequences);
  c.lengths.resize(static_cast<size_t>(n));
  if (n > 0) std::memcpy(c.lengths.data(), p + kHeaderBytes, static_cast<size_t>(n) * 4);
  c.pointers_at = kHeaderBytes + 4 * n;
  const int64_t end = check_lengths_and_pointers(p, c, bin_name, bad);
  c.data_bytes = end;
  if (seal && seal->data_bytes != static_cast<uint64_t>(end)) {
    bad(size + 8, message("the seal gives ", bin_name, " ", seal->data_bytes,
                          " bytes, but the sequence lengths cover ", end));
  }
  c.document_indices =
      read_document_indices(p, c.pointers_at + 8 * n, static_cast<int64_t>(documents), n, bad);
  return c;
}

void check_data_size(const IndexContents& index, int64_t bin_bytes, const std::string& idx_name,
                     const std::string& bin_name) {
  if (bin_bytes < index.data_bytes) {
    const int64_t item = token_size(index.dtype);
    int64_t end = 0;
    for (size_t i = 0; i < index.lengths.size(); ++i) {
      end += index.lengths[i] * item;
      if (end > bin_bytes) {
        fail(idx_name, ": byte ", index.pointers_at + 8 * static_cast<int64_t>(i), ": sequence ", i,
             " ends at byte ", end, " but ", bin_name, " has only ", bin_bytes,
             " bytes (truncated data file, or an index of another dataset)");
      }
    }
  }
  if (bin_bytes != index.data_bytes) {
    fail(bin_name, ": byte ", index.data_bytes, ": ", bin_bytes - index.data_bytes,
         " bytes after the last sequence; its index ", idx_name, " accounts for ", index.data_bytes,
         " of its ", bin_bytes, " bytes: the index does not match this data file");
  }
}

void check_pair(const IndexContents& index, std::span<const std::byte> bin,
                const std::string& idx_name, const std::string& bin_name) {
  const auto bin_bytes = static_cast<int64_t>(bin.size());
  if (!index.seal) {
    check_data_size(index, bin_bytes, idx_name, bin_name);
    return;
  }
  if (bin.size() != index.seal->data_bytes) {
    try {
      check_data_size(index, bin_bytes, idx_name, bin_name);
    } catch (const InvalidArgument& e) {
      fail(e.what(), "; ", idx_name, " was written with a .bin of ", index.seal->data_bytes,
           " bytes: the data file was cut or extended since, or the pair is mixed, from two "
           "writes of the dataset; write the dataset again");
    }
  }
  if (data_fingerprint(bin) != index.seal->fingerprint) {
    fail(bin_name, " is not the data file ", idx_name,
         " was written with (same size, other contents): the pair is mixed, from two writes of "
         "the dataset (a writer stopped between renaming its .bin and its .idx, or another "
         "replaced one of them); write the dataset again");
  }
}

int64_t decode_tokens(const std::byte* data, TokenDType dtype, std::span<int64_t> out) {
  const auto n = static_cast<int64_t>(out.size());
  auto convert = [&]<typename T>(T) -> int64_t {
    for (int64_t j = 0; j < n; ++j) {
      const T v = read_at<T>(data, j * static_cast<int64_t>(sizeof(T)));
      if constexpr (std::is_floating_point_v<T>) {
        // Only integers in [-2^63, 2^63) convert to int64 without undefined behaviour.
        constexpr T kLimit = static_cast<T>(9223372036854775808.0);
        if (!(v >= -kLimit && v < kLimit) || std::trunc(v) != v) return j;
      }
      out[static_cast<size_t>(j)] = static_cast<int64_t>(v);
    }
    return -1;
  };
  switch (dtype) {
    case TokenDType::kUint8:
      return convert(uint8_t{});
    case TokenDType::kInt8:
      return convert(int8_t{});
    case TokenDType::kInt16:
      return convert(int16_t{});
    case TokenDType::kUint16:
      return convert(uint16_t{});
    case TokenDType::kInt32:
      return convert(int32_t{});
    case TokenDType::kInt64:
      return convert(int64_t{});
    case TokenDType::kFloat32:
      return convert(float{});
    case TokenDType::kFloat64:
      return convert(double{});
  }
  return -1;
}

}  // namespace detail

std::unique_ptr<IndexedDataset> IndexedDataset::open(const std::string& prefix) {
  std::unique_ptr<IndexedDataset> d(new IndexedDataset());
  d->prefix_ = prefix;
  const std::string idx = prefix + ".idx";
  const std::string bin = prefix + ".bin";
  detail::IndexContents c;
  // A writer commits .bin, then .idx: a reader between the two renames sees the new .bin beside
  // the old .idx, and one that read .idx just before a whole commit sees the new .bin too. While a
  // writer holds the prefix's lock, or when the .idx read is no longer the one at its path, a
  // mismatch is such a moment: open again.
  const auto deadline = std::chrono::steady_clock::now() + kWaitForWriter;
  for (;;) {
    d->index_ = std::make_unique<Mapping>(idx);
    c = detail::parse_index({d->index_->data, static_cast<size_t>(d->index_->size)}, idx, bin);
    d->data_ = std::make_unique<Mapping>(bin);
    try {
      detail::check_pair(c, {d->data_->data, static_cast<size_t>(d->data_->size)}, idx, bin);
      break;
    } catch (const InvalidArgument& e) {
      const bool racing = d->index_->replaced() || detail::writer_active(prefix);
      if (!racing || std::chrono::steady_clock::now() > deadline) {
        fail(e.what(), kept_old_data_files(bin));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  d->dtype_ = c.dtype;
  d->lengths_ = std::move(c.lengths);
  d->pointers_at_ = c.pointers_at;
  d->document_indices_ = std::move(c.document_indices);
  return d;
}

IndexedDataset::~IndexedDataset() = default;

std::span<const std::byte> IndexedDataset::index_bytes() const {
  index_->require_unchanged(index_->size);
  return {index_->data, static_cast<size_t>(index_->size)};
}

int64_t IndexedDataset::length(int64_t index) const {
  check(index >= 0 && index < size(), "sequence ", index, " outside [0, ", size(), ") of ",
        prefix_);
  return lengths_[static_cast<size_t>(index)];
}

int64_t IndexedDataset::pointer(int64_t index) const {
  length(index);  // range check
  const int64_t at = pointers_at_ + 8 * index;
  index_->require_unchanged(at + 8);
  return read_at<int64_t>(index_->data, at);
}

Sample IndexedDataset::sample(int64_t index) const {
  const int64_t len = length(index);
  const int64_t at = pointer(index);
  Sample s;
  s.id = index;
  s.input_ids.resize(static_cast<size_t>(len));
  data_->require_unchanged(at + len * token_size(dtype_));
  const int64_t bad = detail::decode_tokens(data_->data + at, dtype_, s.input_ids);
  if (bad >= 0) {
    const int64_t byte = at + bad * token_size(dtype_);
    std::ostringstream value;
    value << std::setprecision(17);
    if (dtype_ == TokenDType::kFloat32) {
      value << read_at<float>(data_->data, byte);
    } else {
      value << read_at<double>(data_->data, byte);
    }
    fail(prefix_, ".bin: byte ", byte, ": token ", bad, " of sequence ", index, " is ", value.str(),
         ", not an integer token id that fits int64");
  }
  // Signed dtypes can hold negative values, which are no token id (JSONL refuses them alike).
  const auto negative =
      std::find_if(s.input_ids.begin(), s.input_ids.end(), [](int64_t t) { return t < 0; });
  if (negative != s.input_ids.end()) {
    const auto position = negative - s.input_ids.begin();
    fail(prefix_, ".bin: byte ", at + position * token_size(dtype_), ": token ", position,
         " of sequence ", index, " is ", *negative, "; token ids are >= 0");
  }
  return s;
}

std::string IndexedDataset::locate(int64_t index) const {
  return prefix_ + ".idx sequence " + std::to_string(index);
}

std::string IndexedDataset::describe() const {
  return "indexed " + prefix_ + " (" + std::to_string(size()) + " sequences, " +
         std::to_string(document_indices_.empty() ? 0 : document_indices_.size() - 1) +
         " documents, " + token_dtype_name(dtype_) + ")";
}

}  // namespace thdpack
