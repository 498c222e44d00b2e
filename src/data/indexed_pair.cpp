#include "data/indexed_pair.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "data/temporary_files.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/hash64.hpp"

namespace thdpack::detail {
namespace {

constexpr char kSealMagic[8] = {'T', 'H', 'D', 'P', 'S', 'E', 'A', 'L'};
constexpr int64_t kBlockBytes = 4096;
constexpr int64_t kBlocks = 17;

void put_u64(std::byte* at, uint64_t value) {
  std::memcpy(at, &value, 8);
}
uint64_t get_u64(const std::byte* at) {
  uint64_t value;
  std::memcpy(&value, at, 8);
  return value;
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

std::array<std::byte, kIndexSealBytes> encode_seal(const IndexSeal& seal) {
  std::array<std::byte, kIndexSealBytes> bytes{};
  std::memcpy(bytes.data(), kSealMagic, sizeof kSealMagic);
  put_u64(bytes.data() + 8, seal.data_bytes);
  put_u64(bytes.data() + 16, seal.fingerprint);
  return bytes;
}

std::optional<IndexSeal> find_seal(std::span<const std::byte> index) {
  if (index.size() < static_cast<size_t>(kIndexSealBytes)) return std::nullopt;
  const std::byte* at = index.data() + index.size() - kIndexSealBytes;
  if (std::memcmp(at, kSealMagic, sizeof kSealMagic) != 0) return std::nullopt;
  return IndexSeal{get_u64(at + 8), get_u64(at + 16)};
}

uint64_t data_fingerprint(int64_t size, const ReadBlock& read) {
  Hash64 hash;
  hash.add(size);
  if (size <= 0) return hash.digest();
  const int64_t block = std::min(size, kBlockBytes);
  std::vector<std::byte> buffer(static_cast<size_t>(block));
  for (int64_t k = 0; k < kBlocks; ++k) {
    // Evenly spread starts from 0 to size − block; exact in integers (size < 2^63 / kBlocks).
    const int64_t start =
        (size - block) / (kBlocks - 1) * k + (size - block) % (kBlocks - 1) * k / (kBlocks - 1);
    read(start, buffer);
    hash.update(buffer.data(), buffer.size());
  }
  return hash.digest();
}

uint64_t data_fingerprint(std::span<const std::byte> data) {
  return data_fingerprint(static_cast<int64_t>(data.size()),
                          [&data](int64_t offset, std::span<std::byte> buffer) {
                            std::memcpy(buffer.data(), data.data() + offset, buffer.size());
                          });
}

std::string prefix_lock_path(const std::string& prefix) {
  const std::filesystem::path target(prefix);
  const std::filesystem::path folder = folder_of(target);
  const std::string name = target.filename().string();
  const size_t longest = longest_name(folder);
  std::string lock = ".";
  if (1 + name.size() + 5 <= longest) {
    lock.append(name);
  } else {  // ".NAME-CUT.DIGEST.lock": the digest keeps long names that share a start apart
    lock.append(name, 0, longest - 1 - 17 - 5)
        .append(".")
        .append(hex(Hash64::of(name.data(), name.size())));
  }
  lock.append(".lock");
  return (folder / lock).string();
}

PrefixLock::PrefixLock(const std::string& prefix) : path_(prefix_lock_path(prefix)) {
  // The holder removes the lock file when it is done, so a file opened here may be removed before
  // it is locked: it is ours only when, locked, it is still the file at the path.
  for (;;) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      fail("cannot create the writer lock '", path_, "' of '", prefix, "': ", std::strerror(errno));
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      char holder[32] = {};
      const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
      ::close(fd_);
      fd_ = -1;
      if (error != EWOULDBLOCK) {
        fail("cannot lock '", path_, "' to write '", prefix, "': ", std::strerror(error));
      }
      const std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "unknown";
      fail("'", prefix, "' is being written by another writer (process ",
           pid.substr(0, pid.find('\n')), ", lock '", path_,
           "'): two writers of one indexed dataset would mix their .bin and .idx; wait for it to "
           "finish or write to another prefix");
    }
    struct stat locked {};
    struct stat named {};
    if (::fstat(fd_, &locked) == 0 && ::stat(path_.c_str(), &named) == 0 &&
        locked.st_dev == named.st_dev && locked.st_ino == named.st_ino) {
      break;
    }
    ::close(fd_);  // removed by its last holder meanwhile: lock the new one
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  // The PID is for the message above; a failure to record it does not stop the write.
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

PrefixLock::~PrefixLock() {
  ::unlink(path_.c_str());  // still locked: nobody else holds this file
  ::close(fd_);             // releases the flock
}

bool writer_active(const std::string& prefix) {
  const int fd = ::open(prefix_lock_path(prefix).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

}  // namespace thdpack::detail
