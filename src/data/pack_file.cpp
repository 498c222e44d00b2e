// The pack file of `thdpack pack` and its reader.

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <new>
#include <span>
#include <sstream>
#include <stdexcept>

#include "data/jsonl_index.hpp"
#include "data/pack_source_kinds.hpp"
#include "data/readers.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/input_file.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/packing/offline_packing.hpp"

namespace thdpack {
namespace {

constexpr char kMagic[8] = {'T', 'H', 'D', 'P', 'A', 'C', 'K', 'S'};
// Version 2 added the header checksum; version 3 the source fingerprint and the checksum of the
// whole file at its end; version 4 the options a JSONL source was read with and the index of its
// lines. Versions 3 and 4 are read.
constexpr uint64_t kVersion = 4;
constexpr uint64_t kOldestVersion = 3;

// The JSONL options as the file records them, one bit each.
constexpr uint64_t kIgnoreUnknownKeys = 1;
constexpr uint64_t kLabelsShifted = 2;
constexpr uint64_t kJsonlOptionBits = kIgnoreUnknownKeys | kLabelsShifted;

uint64_t jsonl_option_bits(const JsonlOptions& o) {
  return (o.ignore_unknown_keys ? kIgnoreUnknownKeys : 0) | (o.labels_shifted ? kLabelsShifted : 0);
}

/// Adds a whole open file's bytes to `hash`, read in chunks.
void hash_file(const InputFile& file, Hash64& hash) {
  std::vector<char> chunk(size_t{1} << 20);
  int64_t at = 0;
  while (const size_t got = file.read_at(at, chunk.data(), chunk.size())) {
    hash.update(chunk.data(), got);
    at += static_cast<int64_t>(got);
  }
}

/// The words of an indexed data path: "prefix" or "w1 prefix1 w2 prefix2 ...".
std::vector<std::string> data_path_words(const std::string& spec) {
  std::istringstream in(spec);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

}  // namespace

OpenedPackSource open_pack_source_once(const PackSource& source,
                                       const JsonlOptions& jsonl_options) {
  Hash64 hash;
  hash.update(source.kind.data(), source.kind.size());
  OpenedPackSource out;
  if (source.kind == "indexed") {
    out.dataset = detail::open_indexed_datasets(
        source.spec, source.size, [&hash](const IndexedDataset& part) {
          const std::span<const std::byte> idx = part.index_bytes();
          hash.update(idx.data(), idx.size());
        });
  } else if (source.kind == "jsonl") {
    auto file = std::make_shared<const InputFile>(source.spec, "JSONL file");
    hash_file(*file, hash);
    out.dataset = detail::load_jsonl(std::move(file), jsonl_options);
  } else if (source.kind == "mock") {
    const MockConfig config = parse_mock_config(source.spec);
    std::shared_ptr<const InputFile> lengths;
    if (config.mode == MockConfig::Mode::kFile) {
      lengths = std::make_shared<const InputFile>(config.path, "lengths file");
      hash_file(*lengths, hash);
    }
    out.dataset = detail::make_mock_dataset(config, {}, std::move(lengths));
  } else {
    return detail::registered_pack_source_opener(source.kind)(source);
  }
  out.fingerprint = hash.digest();
  return out;
}

namespace {

/// The index of an entry that repeats an earlier one (the second occurrence of the smallest
/// repeated id), or -1. Every id is in [0, universe). Memory stays within the ids' own size: a
/// flag per possible id when the universe is not much larger than the list, else a sorted copy.
int64_t repeated_entry(std::span<const int64_t> ids, int64_t universe) {
  if (universe <= 64 * static_cast<int64_t>(ids.size()) + 4096) {
    std::vector<bool> seen(static_cast<size_t>(universe), false);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (seen[static_cast<size_t>(ids[i])]) return static_cast<int64_t>(i);
      seen[static_cast<size_t>(ids[i])] = true;
    }
    return -1;
  }
  std::vector<int64_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice == sorted.end()) return -1;
  const auto first = std::find(ids.begin(), ids.end(), *twice);
  return std::find(first + 1, ids.end(), *twice) - ids.begin();
}

class Writer {
 public:
  explicit Writer(const std::string& path) : file_(path) {}
  void bytes(const void* data, size_t n) {
    file_.write(data, n);
    hash_.update(data, n);
  }
  /// XXH64 of every byte written so far.
  uint64_t checksum() const { return hash_.digest(); }
  template <typename T>
  void value(T v) {
    bytes(&v, sizeof(T));
  }
  void text(const std::string& s) {
    value(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void commit() { file_.commit(); }

 private:
  OutputFile file_;
  Hash64 hash_;
};

class Reader {
 public:
  Reader(std::string path, std::span<const std::byte> data) : path_(std::move(path)), data_(data) {}
  template <typename T>
  T value(const char* what) {
    start_ = at_;
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string text(const char* what) {
    const auto n = value<uint32_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_.data()) + at_, n);
    at_ += n;
    return s;
  }
  void array(std::vector<int64_t>& out, uint64_t count, const char* what) {
    start_ = at_;
    if (count > (data_.size() - at_) / 8) fail(std::string(what) + ": the file is too short");
    out.resize(static_cast<size_t>(count));
    if (count > 0) std::memcpy(out.data(), data_.data() + at_, static_cast<size_t>(count) * 8);
    at_ += static_cast<size_t>(count) * 8;
  }
  // Errors name the byte where the value read last (or being read) starts.
  [[noreturn]] void fail(const std::string& what) const { fail_at(start_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    thdpack::fail(path_, ": byte ", at, ": ", what);  // the member fail hides it
  }
  bool at_end() const { return at_ == data_.size(); }
  size_t position() const { return at_; }
  /// XXH64 of the bytes before the current position.
  uint64_t checksum() const { return Hash64::of(data_.data(), at_); }
  size_t size() const { return data_.size(); }

 private:
  void need(size_t n, const char* what) const {
    if (data_.size() - at_ < n) fail(std::string("the file ends inside ") + what);
  }
  std::string path_;
  std::span<const std::byte> data_;
  size_t at_ = 0;
  size_t start_ = 0;
};

/// "PATH: byte B: sample index ID (entry I)", for messages about one sample index.
std::string entry_text(const std::string& path, size_t ids_at, size_t entry, int64_t id) {
  return message(path, ": byte ", ids_at + 8 * entry, ": sample index ", id, " (entry ", entry,
                 ")");
}

/// The pack file of `packs`; `index`: the JSONL source's index and options (nullptr: none).
void write_file(const std::string& path, const Bins& packs, int64_t capacity, int64_t divisor,
                const PackSource& source, uint64_t fingerprint, const detail::JsonlIndex* index) {
  // The format's contract: each sample of the source at most once (all of them unless packing
  // stopped at a limit); readers rely on it.
  for (int64_t id : packs.items) {
    check(id >= 0 && id < source.size, "write_pack_file: sample ", id, " is outside the source's ",
          source.size);
  }
  if (const int64_t i = repeated_entry(packs.items, source.size); i >= 0) {
    fail("write_pack_file: sample ", packs.items[static_cast<size_t>(i)],
         " is in more than one pack");
  }
  if (index != nullptr) {
    check(index->size() == source.size, "write_pack_file: the JSONL dataset has ", index->size(),
          " samples but the source says ", source.size);
  }
  Writer w(path);
  w.bytes(kMagic, sizeof(kMagic));
  w.value(kVersion);
  w.value(capacity);
  w.value(divisor);
  w.text(source.kind);
  w.text(source.spec);
  w.value(source.size);
  w.value(fingerprint);
  w.value(static_cast<uint64_t>(packs.count()));
  w.value(static_cast<uint64_t>(packs.items.size()));
  w.value(index != nullptr ? jsonl_option_bits(index->options) : uint64_t{0});
  w.value(static_cast<uint64_t>(index != nullptr ? index->size() : 0));
  w.value(w.checksum());  // of the header: a damaged size or count must not be trusted
  w.bytes(packs.offsets.data(), packs.offsets.size() * 8);
  w.bytes(packs.items.data(), packs.items.size() * 8);
  if (index != nullptr) {
    for (const std::vector<int64_t>* a :
         {&index->offsets, &index->bytes, &index->lines, &index->lengths}) {
      w.bytes(a->data(), a->size() * 8);
    }
  }
  w.value(w.checksum());  // of the whole file: one flipped bit must not move a pack
  w.commit();
}

}  // namespace

void write_pack_file(const std::string& path, const Bins& packs, int64_t capacity, int64_t divisor,
                     const PackSource& source) {
  if (source.kind == "jsonl") {
    const OpenedPackSource opened = open_pack_source_once(source);
    write_pack_file(path, packs, capacity, divisor, source, opened.fingerprint, *opened.dataset);
    return;
  }
  write_pack_file(path, packs, capacity, divisor, source, source_fingerprint(source));
}

void write_pack_file(const std::string& path, const Bins& packs, int64_t capacity, int64_t divisor,
                     const PackSource& source, uint64_t fingerprint) {
  write_file(path, packs, capacity, divisor, source, fingerprint, nullptr);
}

void write_pack_file(const std::string& path, const Bins& packs, int64_t capacity, int64_t divisor,
                     const PackSource& source, uint64_t fingerprint, const Dataset& dataset) {
  const detail::JsonlIndex* index = nullptr;
  if (source.kind == "jsonl") {
    index = detail::jsonl_index_of(dataset);
    check(index != nullptr, "write_pack_file: the dataset of a jsonl source must be one that ",
          "load_jsonl_dataset or open_pack_source_once read, not ", dataset.describe());
  }
  write_file(path, packs, capacity, divisor, source, fingerprint, index);
}

uint64_t source_fingerprint(const PackSource& source) {
  Hash64 hash;
  hash.update(source.kind.data(), source.kind.size());
  if (source.kind == "indexed") {
    const std::vector<std::string> words = data_path_words(source.spec);
    for (size_t i = words.size() == 1 ? 0 : 1; i < words.size(); i += 2) {
      hash_file(InputFile(words[i] + ".idx", "index"), hash);
    }
  } else if (source.kind == "jsonl") {
    hash_file(InputFile(source.spec, "JSONL file"), hash);
  } else if (source.kind == "mock") {
    const MockConfig config = parse_mock_config(source.spec);
    if (config.mode == MockConfig::Mode::kFile) {
      hash_file(InputFile(config.path, "lengths file"), hash);
    }
  } else {
    return detail::registered_pack_source_opener(source.kind)(source).fingerprint;
  }
  return hash.digest();
}

std::unique_ptr<Dataset> open_pack_source(const PackSource& source) {
  if (source.kind == "indexed") return open_indexed_datasets(source.spec, source.size);
  if (source.kind == "jsonl") return load_jsonl_dataset(source.spec);
  if (source.kind == "mock") return make_mock_dataset(parse_mock_config(source.spec));
  return detail::registered_pack_source_opener(source.kind)(source).dataset;
}

namespace {

/// The offsets rise from 0 to the sample count, and every sample index is one of the source's
/// and listed once; throws InvalidArgument naming the byte. `body_at`: where the offsets start;
/// `packs_at`: where the pack count is.
void check_arrays(const detail::PackFileContents& d, Reader& r, const std::string& path,
                  size_t body_at, size_t packs_at) {
  const auto ids = static_cast<uint64_t>(d.ids.size());
  const size_t offsets_at = body_at;
  for (size_t p = 0; p < d.offsets.size(); ++p) {
    const int64_t v = d.offsets[p];
    const bool ok = (p == 0 ? v == 0 : v >= d.offsets[p - 1]) &&
                    (p + 1 < d.offsets.size() ? v <= static_cast<int64_t>(ids)
                                              : v == static_cast<int64_t>(ids));
    if (!ok) {
      fail(path, ": byte ", offsets_at + 8 * p, ": pack offset ", p, " is ", v,
           "; pack offsets must rise from 0 to the sample count ", ids);
    }
  }
  if (static_cast<int64_t>(ids) > d.source.size) {
    r.fail_at(packs_at + 8,
              message("the sample count ", ids, " exceeds the source's ", d.source.size,
                      " samples; a pack file lists each sample at most once"));
  }
  const size_t ids_at = offsets_at + 8 * d.offsets.size();
  for (size_t i = 0; i < d.ids.size(); ++i) {
    if (d.ids[i] < 0 || d.ids[i] >= d.source.size) {
      fail(entry_text(path, ids_at, i, d.ids[i]), " is outside the source's ", d.source.size,
           " samples");
    }
  }
  if (const int64_t i = repeated_entry(d.ids, d.source.size); i >= 0) {
    const auto entry = static_cast<size_t>(i);
    thdpack::fail(entry_text(path, ids_at, entry, d.ids[entry]),
                  " appears a second time; each sample is in at most one pack");
  }
}

/// The lines of a JSONL index follow each other in the file (each starts past the '\n' after the
/// one before), are not blank, not longer than a JSONL line may be and number upwards from 1, and
/// every sample has a token; throws InvalidArgument naming the byte of the entry.
void check_jsonl_index(const detail::JsonlIndex& index, const std::string& path, size_t at) {
  const size_t n = index.offsets.size();
  const auto entry_fail = [&](size_t array, size_t i, const std::string& what) {
    fail(path, ": byte ", at + 8 * (array * n + i), ": JSONL index entry ", i, ": ", what);
  };
  for (size_t i = 0; i < n; ++i) {
    const int64_t offset = index.offsets[i], bytes = index.bytes[i];
    const int64_t after = i == 0 ? 0 : index.offsets[i - 1] + index.bytes[i - 1] + 1;
    if (offset < after) {
      entry_fail(0, i,
                 message("its line starts at byte ", offset, ", before byte ", after,
                         " (the lines of the index follow each other)"));
    }
    if (bytes < 1 || bytes > static_cast<int64_t>(kMaxJsonlLineBytes) ||
        offset > std::numeric_limits<int64_t>::max() - bytes - 1) {
      entry_fail(
          1, i,
          message("its line of ", bytes, " bytes at byte ", offset,
                  " is not one a JSONL file can hold (1 to ", kMaxJsonlLineBytes, " bytes)"));
    }
    if (index.lines[i] < 1 || (i > 0 && index.lines[i] <= index.lines[i - 1])) {
      entry_fail(2, i,
                 message("line number ", index.lines[i],
                         " (the line numbers rise from 1 with the samples)"));
    }
    if (index.lengths[i] < 1) {
      entry_fail(3, i, message("a sample of ", index.lengths[i], " tokens (at least 1)"));
    }
  }
}

}  // namespace

detail::PackFileContents detail::parse_pack_file(std::span<const std::byte> bytes,
                                                 const std::string& path) {
  Reader r(path, bytes);
  PackFileContents d;
  char magic[8];
  for (char& c : magic) c = r.value<char>("the magic");
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    r.fail_at(0, "not a thdpack pack file (magic THDPACKS expected)");
  }
  const auto version = r.value<uint64_t>("the version");
  if (version < kOldestVersion || version > kVersion) {
    r.fail(message("unsupported pack file version ", version, " (this build reads ", kOldestVersion,
                   " and ", kVersion,
                   version < kOldestVersion
                       ? ", which add a checksum of the whole file and a fingerprint of the source"
                       : "",
                   "; pack the dataset again)"));
  }
  d.version = version;
  d.capacity = r.value<int64_t>("the capacity");
  d.divisor = r.value<int64_t>("the divisor");
  if (d.capacity < 1 || d.divisor < 1) {
    r.fail_at(16, message("capacity ", d.capacity, " and divisor ", d.divisor, " must be >= 1"));
  }
  d.source.kind = r.text("the source kind");
  d.source.spec = r.text("the source");
  d.source.size = r.value<int64_t>("the source size");
  d.fingerprint = r.value<uint64_t>("the source fingerprint");
  const size_t packs_at = r.position();
  const auto packs = r.value<uint64_t>("the pack count");
  const auto ids = r.value<uint64_t>("the sample count");
  // packs + 1 offsets: a count of 2^64-1 would wrap to 0 and leave no offsets at all.
  if (packs >= std::numeric_limits<uint64_t>::max() / 8) {
    r.fail_at(packs_at, message("pack count ", packs, " does not fit the file"));
  }
  uint64_t options = 0, entries = 0;
  size_t options_at = 0;
  if (version >= 4) {
    options_at = r.position();
    options = r.value<uint64_t>("the JSONL options");
    entries = r.value<uint64_t>("the JSONL index size");
  }
  const uint64_t header_checksum = r.checksum();
  if (r.value<uint64_t>("the header checksum") != header_checksum) {
    r.fail("the header checksum does not match: the file is damaged");
  }
  // Checked only once the header checksum says they are what was written.
  if (d.source.kind == "jsonl") {
    if ((options & ~kJsonlOptionBits) != 0) {
      r.fail_at(options_at, message("unknown JSONL options ", options, " (this build knows ",
                                    kJsonlOptionBits, ")"));
    }
    if (entries != 0 && entries != static_cast<uint64_t>(d.source.size)) {
      r.fail_at(options_at + 8, message("the JSONL index has ", entries,
                                        " entries; it has one per sample of the source (",
                                        d.source.size, ") or none"));
    }
  } else if (options != 0 || entries != 0) {
    r.fail_at(options_at,
              message("JSONL options ", options, " and an index of ", entries,
                      " entries for a source of kind ", d.source.kind, ", which has neither"));
  }
  d.jsonl_index.options.ignore_unknown_keys = (options & kIgnoreUnknownKeys) != 0;
  d.jsonl_index.options.labels_shifted = (options & kLabelsShifted) != 0;
  // The whole file's checksum before any array is trusted: a flipped bit in an offset or a sample
  // index would otherwise move a pack boundary or swap a sample silently.
  const size_t body_at = r.position();
  const uint64_t arrays = (r.size() - body_at) / 8;
  if (r.size() < body_at + 8 || packs + 1 > arrays || ids > arrays - (packs + 1) ||
      entries > (arrays - (packs + 1) - ids) / 4 ||
      body_at + 8 * (packs + 1 + ids + 4 * entries) + 8 != r.size()) {
    r.fail_at(
        packs_at,
        message(packs, " packs and ", ids, " sample indices",
                entries > 0 ? message(" and ", entries, " JSONL index entries") : "",
                " do not fit the file's ", r.size(), " bytes: the file is truncated or damaged"));
  }
  const size_t checksum_at = r.size() - 8;
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + checksum_at, 8);
  if (stored != Hash64::of(bytes.data(), checksum_at)) {
    r.fail_at(checksum_at, "the checksum of the file does not match: the file is damaged");
  }
  r.array(d.offsets, packs + 1, "the pack offsets");
  r.array(d.ids, ids, "the sample indices");
  check_arrays(d, r, path, body_at, packs_at);
  const size_t index_at = r.position();
  detail::JsonlIndex& index = d.jsonl_index;
  r.array(index.offsets, entries, "the JSONL line offsets");
  r.array(index.bytes, entries, "the JSONL line sizes");
  r.array(index.lines, entries, "the JSONL line numbers");
  r.array(index.lengths, entries, "the JSONL sample lengths");
  check_jsonl_index(index, path, index_at);
  return d;
}

namespace {

/// The source of a pack file, opened as it was read when packed: a JSONL source with its recorded
/// options, and through its index when the file has one and is the file indexed (its fingerprint
/// matches; a changed file is read whole, so that the message says what changed).
OpenedPackSource open_recorded_source(const PackSource& source, detail::JsonlIndex&& index,
                                      uint64_t recorded_fingerprint) {
  if (source.kind != "jsonl") return open_pack_source_once(source);
  if (index.size() == 0) return open_pack_source_once(source, index.options);
  auto file = std::make_shared<const InputFile>(source.spec, "JSONL file");
  Hash64 hash;
  hash.update(source.kind.data(), source.kind.size());
  hash_file(*file, hash);
  OpenedPackSource out;
  out.fingerprint = hash.digest();
  if (out.fingerprint == recorded_fingerprint) {
    out.dataset = detail::open_indexed_jsonl(std::move(file), std::move(index));
  } else {
    out.dataset = detail::load_jsonl(std::move(file), index.options);
  }
  return out;
}

}  // namespace

std::unique_ptr<PackedDataset> PackedDataset::open(const std::string& path) {
  auto lease = std::make_unique<InputLease>(path, "pack file");
  const std::string text = lease->file().read_all(std::numeric_limits<size_t>::max());
  detail::PackFileContents c =
      detail::parse_pack_file(std::as_bytes(std::span<const char>(text.data(), text.size())), path);
  std::unique_ptr<PackedDataset> d(new PackedDataset());
  d->lease_ = std::move(lease);
  d->capacity_ = c.capacity;
  d->divisor_ = c.divisor;
  d->source_ = std::move(c.source);
  d->offsets_ = std::move(c.offsets);
  d->ids_ = std::move(c.ids);
  // The checksums make a damaged size unlikely; a real one too large cannot be opened.
  const auto too_large = [&] {
    return InvalidArgument(message(path, ": its ", d->source_.kind, " source of ", d->source_.size,
                                   " samples does not fit in memory"));
  };
  uint64_t now = 0;
  try {
    OpenedPackSource opened =
        open_recorded_source(d->source_, std::move(c.jsonl_index), c.fingerprint);
    d->dataset_ = std::move(opened.dataset);
    now = opened.fingerprint;
  } catch (const InvalidArgument& e) {
    thdpack::fail(path, ": cannot open its ", d->source_.kind, " source: ", e.what());
  } catch (const std::bad_alloc&) {
    throw too_large();
  } catch (const std::length_error&) {
    throw too_large();
  }
  if (d->dataset_->size() != d->source_.size) {
    fail(path, ": its source ", d->source_.spec, " now has ", d->dataset_->size(),
         " samples, not the ", d->source_.size, " it was packed from");
  }
  if (now != c.fingerprint) {
    fail(path, ": its source ", d->source_.spec, " changed since it was packed (same ",
         d->source_.size, " samples, other content); pack it again");
  }
  return d;
}

std::span<const int64_t> PackedDataset::pack(int64_t p) const {
  check(p >= 0 && p < num_packs(), "pack ", p, " outside [0, ", num_packs(), ")");
  const auto i = static_cast<size_t>(p);
  return std::span<const int64_t>(ids_).subspan(static_cast<size_t>(offsets_[i]),
                                                static_cast<size_t>(offsets_[i + 1] - offsets_[i]));
}

PackedBatch PackedDataset::batch(int64_t p, const PackOptions& options) const {
  const std::vector<Sample> samples = dataset_->samples(pack(p));
  std::vector<SampleView> views;
  for (const Sample& s : samples) views.push_back(view_of(s));
  PackOptions o = options;
  o.divisor = divisor_;
  o.capacity = capacity_;
  return pack_samples(views, o);
}

}  // namespace thdpack
