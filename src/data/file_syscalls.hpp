#pragma once
// The system calls through which the data layer opens its inputs by path and makes its outputs
// durable. Production uses the system's own; tests replace an entry to count the calls or to make
// one fail (only while no other thread opens or writes files).

namespace thdpack::detail {

struct FileSyscalls {
  /// open(2) of an input by its path, read-only; every input of the library is opened here once.
  int (*open_input)(const char* path, int flags);
  /// fsync(2) of an output's temporary file and of its folder.
  int (*fsync)(int fd);
  /// rename(2) of an output's temporary file over the final path.
  int (*rename)(const char* from, const char* to);
};

/// The calls in use (process-wide).
FileSyscalls& file_syscalls();

}  // namespace thdpack::detail
