#pragma once
// Opening input files safely: every reader of thdpack (JSONL, lengths files, mock configs, indexed
// datasets, pack files) opens its files through these, so that
// - what is not a regular file (a FIFO, a device such as /dev/zero, a directory, a socket) is
//   refused with its path before it is opened, instead of blocking or reading without end;
// - text read line by line or whole has a documented size limit;
// - a file in use as an input is leased, and OutputFile refuses to replace it.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <istream>
#include <memory>
#include <string>

namespace thdpack {

/// Longest JSONL line read (bytes, 256 MiB: about 25 million tokens of 10 characters).
inline constexpr size_t kMaxJsonlLineBytes = size_t{256} << 20;
/// Longest line of a lengths file (bytes).
inline constexpr size_t kMaxLengthsLineBytes = 4096;
/// Largest config file read whole (mock dataset configs, bytes: 16 MiB).
inline constexpr size_t kMaxConfigFileBytes = size_t{16} << 20;

/// Throws InvalidArgument naming `what` and `path` unless `path` (symbolic links followed) is a
/// regular file that exists. Nothing is opened, so a FIFO never blocks.
void require_regular_file(const std::string& path, const std::string& what);

/// require_regular_file, then opens `path` for reading (binary). Throws InvalidArgument naming the
/// file when it cannot be opened.
std::ifstream open_input_file(const std::string& path, const std::string& what);

/// The whole of a regular file of at most `max_bytes` bytes; InvalidArgument naming the file and
/// the limit when it is larger.
std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes);

/// std::getline with a bound: reads the next line of `in` (without its '\n') into `line`; false at
/// the end of the input. A line longer than `max_bytes` throws InvalidArgument "`where`: line
/// longer than N bytes".
bool read_bounded_line(std::istream& in, std::string& line, size_t max_bytes,
                       const std::string& where);

/// While alive, marks a file (by device and inode, so every path, symbolic or hard link to it is
/// the same file) as an input in use in this process; OutputFile refuses to replace it. Readers
/// hold one for as long as their dataset may read or refer to the file.
class InputLease {
 public:
  /// Leases `path` (require_regular_file first, `what` naming the file in its messages).
  explicit InputLease(const std::string& path, const std::string& what = "input");
  ~InputLease();
  InputLease(const InputLease&) = delete;
  InputLease& operator=(const InputLease&) = delete;

 private:
  uint64_t device_ = 0;
  uint64_t inode_ = 0;
};

/// The path of the leased input that `path` is the same file as, or "" (also when `path` does not
/// exist).
std::string leased_input_at(const std::string& path);

}  // namespace thdpack
