#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Opening input files safely: every reader of thdpack (JSONL, lengths files, mock configs, indexed
// datasets, pack files) opens its files through these, so that
// - each input is opened by its path exactly once, and everything after (the regular-file check,
//   the size, the reads and maps) goes through that descriptor: a file swapped in under the path
//   meanwhile is never the one read;
// - what is not a regular file (a FIFO, a device such as /dev/zero, a directory, a socket) is
//   refused with its path without blocking (the open does not wait for a FIFO's writer) and
//   without reading it;
// - text read line by line or whole has a documented size limit;
// - a file in use as an input is leased and pinned, and OutputFile refuses to replace it.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <istream>
#include <memory>
#include <streambuf>
#include <string>
#include <vector>

namespace thdpack {

/// Longest JSONL line read (bytes, 256 MiB: about 25 million tokens of 10 characters).
inline constexpr size_t kMaxJsonlLineBytes = size_t{256} << 20;
/// Longest line of a lengths file (bytes).
inline constexpr size_t kMaxLengthsLineBytes = 4096;
/// Largest config file read whole (mock dataset configs, bytes: 16 MiB).
inline constexpr size_t kMaxConfigFileBytes = size_t{16} << 20;

/// A regular file open for reading. The descriptor is the file from then on: its size, reads and
/// maps ask it, never the path again, and it keeps the inode alive (so its device and inode name
/// no other file) until destroyed.
class InputFile {
 public:
  /// Opens `path` once (read-only, non-blocking, close-on-exec, never as a controlling terminal),
  /// then checks the descriptor: InvalidArgument "`what` 'PATH' is a FIFO (named pipe), not a
  /// regular file; give a file" (or a character device, a directory, ...) unless it is a regular
  /// file, and "cannot open `what` 'PATH': REASON" when it cannot be opened.
  InputFile(const std::string& path, const std::string& what);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int descriptor() const { return fd_; }
  const std::string& path() const { return path_; }
  /// What the file is to its reader ("JSONL file"), for messages.
  const std::string& what() const { return what_; }
  uint64_t device() const { return device_; }
  uint64_t inode() const { return inode_; }
  /// The size now (fstat of the descriptor), in bytes.
  int64_t size() const;
  /// Reads up to `n` bytes at byte `offset` into `out`; the number read, 0 at the end. Never moves
  /// the descriptor's file position, so several readers of one file do not disturb each other.
  /// InvalidArgument naming the file when the read fails.
  size_t read_at(int64_t offset, char* out, size_t n) const;
  /// The whole file, of at most `max_bytes` bytes; InvalidArgument naming the file and the limit
  /// when it is larger (also when it grows past the limit while read).
  std::string read_all(size_t max_bytes) const;

 private:
  std::string path_;
  std::string what_;
  int fd_ = -1;
  uint64_t device_ = 0;
  uint64_t inode_ = 0;
};

/// A std::istream over an InputFile from its first byte (read with InputFile::read_at). The file
/// must outlive the stream.
class InputStream : public std::istream {
 public:
  explicit InputStream(const InputFile& file);

 private:
  class Buffer : public std::streambuf {
   public:
    explicit Buffer(const InputFile& file);

   protected:
    int_type underflow() override;

   private:
    const InputFile& file_;
    std::vector<char> chunk_;
    int64_t next_ = 0;  ///< file offset of the byte after the chunk
  };
  Buffer buffer_;
};

/// The whole of a regular file of at most `max_bytes` bytes (InputFile then read_all); the errors
/// of both.
std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes);

/// std::getline with a bound: reads the next line of `in` (without its '\n') into `line`; false at
/// the end of the input. A line longer than `max_bytes` throws InvalidArgument "`where`: line
/// longer than N bytes".
bool read_bounded_line(std::istream& in, std::string& line, size_t max_bytes,
                       const std::string& where);

/// While alive, marks an open input file as in use in this process; OutputFile refuses to replace
/// it under any name (path, symbolic or hard link). The lease holds the file's descriptor, so the
/// leased inode cannot be deleted and reused for an unrelated file while leased, and a file
/// replaced under the path is told apart from the leased one. Readers hold one for as long as
/// their dataset may read or refer to the file, and read through file().
class InputLease {
 public:
  /// Opens `path` (InputFile, with its errors) and leases it.
  explicit InputLease(const std::string& path, const std::string& what = "input");
  /// Leases a file already open.
  explicit InputLease(std::shared_ptr<const InputFile> file);
  ~InputLease();
  InputLease(const InputLease&) = delete;
  InputLease& operator=(const InputLease&) = delete;

  const InputFile& file() const { return *file_; }

 private:
  std::shared_ptr<const InputFile> file_;
};

/// The path of the leased input that `path` is the same file as (compared with fstat of each
/// lease's own descriptor), or "" (also when `path` does not exist).
std::string leased_input_at(const std::string& path);

}  // namespace thdpack
