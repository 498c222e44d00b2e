// Safe opening of input files and the registry of inputs in use (see input_file.hpp).

#include "thdpack/data/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "data/file_syscalls.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

int open_read_only(const char* path, int flags) {
  return ::open(path, flags);
}

std::string kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

InvalidArgument not_regular(const std::string& what, const std::string& path, mode_t mode) {
  return InvalidArgument(what + " '" + path + "' is " + kind_of(mode) +
                         ", not a regular file; give a file");
}

// Inputs in use: the leases alive, each holding its file open.
struct Registry {
  std::mutex mutex;
  std::vector<const InputFile*> files;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: leases may outlive static teardown
  return *r;
}

}  // namespace

detail::FileSyscalls& detail::file_syscalls() {
  static FileSyscalls calls{open_read_only, ::fsync, std::rename};
  return calls;
}

InputFile::InputFile(const std::string& path, const std::string& what) : path_(path), what_(what) {
  if (path.empty()) fail(what, ": the path is empty");
  // Non-blocking: a FIFO with no writer opens at once (and is refused below) instead of waiting.
  fd_ = detail::file_syscalls().open_input(path.c_str(),
                                           O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd_ < 0) {
    const int error = errno;
    // A Unix socket cannot be opened at all (ENXIO); say what it is, as for the others.
    struct stat st {};
    if (error == ENXIO && ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      throw not_regular(what, path, st.st_mode);
    }
    fail("cannot open ", what, " '", path, "': ", std::strerror(error));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int error = errno;
    ::close(fd_);
    if (S_ISREG(st.st_mode) || st.st_mode == 0) {
      fail("cannot open ", what, " '", path, "': ", std::strerror(error));
    }
    throw not_regular(what, path, st.st_mode);
  }
  // Regular files ignore O_NONBLOCK today; cleared so that reads stay plain blocking reads.
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) != 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  device_ = static_cast<uint64_t>(st.st_dev);
  inode_ = static_cast<uint64_t>(st.st_ino);
}

InputFile::~InputFile() {
  ::close(fd_);
}

int64_t InputFile::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    fail("cannot read ", what_, " '", path_, "': ", std::strerror(errno));
  }
  return static_cast<int64_t>(st.st_size);
}

size_t InputFile::read_at(int64_t offset, char* out, size_t n) const {
  for (;;) {
    const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) {
      fail("cannot read ", what_, " '", path_, "': ", std::strerror(errno));
    }
  }
}

std::string InputFile::read_all(size_t max_bytes) const {
  const int64_t bytes = size();
  check(static_cast<uint64_t>(bytes) <= max_bytes, what_, " '", path_, "' has ", bytes,
        " bytes; the limit is ", max_bytes);
  // Read at most one byte past the limit: a file that grew since fstat is refused, not read whole.
  const size_t most = max_bytes < SIZE_MAX ? max_bytes + 1 : max_bytes;
  std::string text(std::min(most, static_cast<size_t>(bytes) + 1), '\0');
  size_t total = 0;
  for (;;) {
    if (total == text.size()) {
      check(total <= max_bytes, what_, " '", path_, "' is larger than the limit of ", max_bytes,
            " bytes");
      text.resize(std::min(most, 2 * total));
    }
    const size_t got =
        read_at(static_cast<int64_t>(total), text.data() + total, text.size() - total);
    if (got == 0) break;
    total += got;
  }
  text.resize(total);
  return text;
}

InputStream::Buffer::Buffer(const InputFile& file) : file_(file), chunk_(size_t{1} << 16) {}

InputStream::Buffer::int_type InputStream::Buffer::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  const size_t got = file_.read_at(next_, chunk_.data(), chunk_.size());
  if (got == 0) return traits_type::eof();
  next_ += static_cast<int64_t>(got);
  setg(chunk_.data(), chunk_.data(), chunk_.data() + got);
  return traits_type::to_int_type(*gptr());
}

InputStream::InputStream(const InputFile& file) : std::istream(nullptr), buffer_(file) {
  rdbuf(&buffer_);
}

std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes) {
  return InputFile(path, what).read_all(max_bytes);
}

bool read_bounded_line(std::istream& in, std::string& line, size_t max_bytes,
                       const std::string& where) {
  line.clear();
  std::streambuf* buffer = in.rdbuf();
  if (buffer == nullptr || !in.good()) return false;
  for (;;) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return !line.empty();
    }
    if (c == '\n') return true;
    check(line.size() < max_bytes, where, ": line longer than ", max_bytes, " bytes (the limit)");
    line.push_back(static_cast<char>(c));
  }
}

InputLease::InputLease(const std::string& path, const std::string& what)
    : InputLease(std::make_shared<const InputFile>(path, what)) {}

InputLease::InputLease(std::shared_ptr<const InputFile> file) : file_(std::move(file)) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.files.push_back(file_.get());
}

InputLease::~InputLease() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = std::find(r.files.begin(), r.files.end(), file_.get());
  if (it != r.files.end()) r.files.erase(it);
}

std::string leased_input_at(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  for (const InputFile* file : r.files) {
    struct stat leased {};
    if (::fstat(file->descriptor(), &leased) == 0 && leased.st_dev == st.st_dev &&
        leased.st_ino == st.st_ino) {
      return file->path();
    }
  }
  return "";
}

}  // namespace thdpack
