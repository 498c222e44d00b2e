#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Writing output files safely: every writer of thdpack (indexed datasets, pack files, the CLI's
// plan files) writes through OutputFile, so that
// - an output that is the same file as an input in use (same path, a symbolic or hard link to it,
//   another spelling of it, a companion such as PREFIX.bin of an open indexed dataset) is refused
//   before anything is opened for writing;
// - what is there stays intact until the new file is complete: the bytes go to a temporary file
//   in the same folder, synced to disk (fsync) and then renamed into place by commit(), which
//   syncs the folder too, so that a crash leaves either the old file or the whole new one; a
//   writer that fails or is abandoned removes the temporary file. Its name,
//   ".NAME.tmp.HOST.PID.XXXXXX" (NAME shortened to fit the folder's name limit), lets a later
//   writer of the same path remove what a killed one left.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace thdpack {

/// Throws InvalidArgument naming `path` when it is (resolving links) the same file as an input in
/// use (see InputLease), or exists and is not a regular file.
void refuse_replacing_inputs(const std::string& path);
/// refuse_replacing_inputs for each path, before any of them is written.
void refuse_replacing_inputs(const std::vector<std::string>& paths);

/// For programs that write outputs (the CLI): SIGINT, SIGTERM, SIGHUP and SIGQUIT first remove the
/// temporary files of every OutputFile still being written, then end the process as the signal
/// would have; SIGXFSZ (past RLIMIT_FSIZE) is ignored, so that the write fails with a message and
/// its temporary file is removed. A writer killed outright (SIGKILL) leaves its temporary file: the
/// next OutputFile for the same path on the same host removes it once its process is gone.
/// Installs process-wide signal handlers: a library embedded in another program (Python) does not
/// call it.
void clean_up_outputs_on_signals();

class OutputFile;

/// Moves two complete outputs that belong together into place, `first` then `second` (an
/// indexed dataset's PREFIX.bin and PREFIX.idx), so that a failure at any step leaves either both
/// old files or both new ones: what was at `first`'s path is kept under a hidden backup name in
/// its folder (a hard link, or the file itself renamed where the filesystem has no hard links)
/// until `second` is in place, and is put back when `second`'s rename or the folder sync between
/// the two renames fails (a `first` that did not exist before is removed again); the message then
/// ends with "'FIRST' and 'SECOND' are left as they were". When only the last folder sync fails,
/// both new files are in place and the message says they may not survive a crash. When even
/// putting the old `first` back fails, the message names both files and where the old one was
/// kept. A crash (not a failure) between the two renames can still leave a new `first` beside an
/// old `second`, with the backup beside them.
void commit_pair(OutputFile& first, OutputFile& second);

/// The outputs of one command as one unit: while it lives on this thread, OutputFile::commit()
/// and commit_pair() close their files (complete and synced on disk, not yet in place) and hand
/// them to it. commit_all() then moves them into place in the order they came; a scope destroyed
/// without commit_all() (the command failed on the way) removes them all, so a command whose last
/// output fails replaces none of its outputs. Scopes do not nest (InvalidArgument).
class DeferredCommits {
 public:
  DeferredCommits();
  ~DeferredCommits();
  DeferredCommits(const DeferredCommits&) = delete;
  DeferredCommits& operator=(const DeferredCommits&) = delete;

  /// Moves every output handed over into place (commit / commit_pair), in order, and ends the
  /// deferral. Throws what the commits throw; outputs not yet moved are removed.
  void commit_all();

  /// Where to read `path` meanwhile: the complete temporary file of a pending output that goes to
  /// `path`, else `path` itself (a command that reads back what it wrote, as pack --materialize).
  std::string readable_path(const std::string& path) const;

 private:
  friend class OutputFile;
  friend void commit_pair(OutputFile& first, OutputFile& second);
  struct Pending;
  std::vector<Pending> pending_;
  bool active_ = true;
};

class OutputFile {
 public:
  /// Checks `path` (refuse_replacing_inputs) and creates the temporary file beside it. Throws
  /// InvalidArgument naming the path when either fails.
  explicit OutputFile(const std::string& path);
  /// Removes the temporary file unless commit() succeeded.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  /// Takes over `other`'s temporary file (`other` is left with none).
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;

  /// The stream to write the new content to.
  std::FILE* stream() { return file_; }
  /// Appends `n` bytes; InvalidArgument naming the path when the write fails.
  void write(const void* data, size_t n);
  /// The final path (links resolved), for messages.
  const std::string& path() const { return path_; }
  /// Flushes, syncs (fsync) and closes the temporary file without moving it into place, so that
  /// several files can all be complete on disk before any is renamed. InvalidArgument naming the
  /// path when any step fails. Does nothing when already closed.
  void close();
  /// Closes the temporary file (close()), renames it over the final path (with the permissions a
  /// new file would get) and syncs the folder. InvalidArgument naming the path when any step
  /// fails; until the rename, what was at the path is intact and the destructor removes the
  /// temporary file. While a DeferredCommits lives on this thread, only closes the file and hands
  /// it to that scope, which moves it into place later.
  void commit();

 private:
  friend void commit_pair(OutputFile& first, OutputFile& second);
  friend class DeferredCommits;
  /// commit() itself, whatever scope is active.
  void commit_now();
  /// The rename of commit() without the folder sync.
  void move_into_place();

  std::string path_;
  std::string temp_path_;
  /// Lets the signal handlers of clean_up_outputs_on_signals remove temp_path_ (opaque here).
  std::shared_ptr<void> registration_;
  std::FILE* file_ = nullptr;
  bool closed_ = false;  ///< the temporary file is complete on disk
  bool committed_ = false;
};

}  // namespace thdpack
