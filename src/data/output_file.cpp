// Output files written to a temporary file and renamed into place, never over an input in use
// (see output_file.hpp).

#include "thdpack/data/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <utility>

#include "data/file_syscalls.hpp"
#include "data/temporary_files.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/input_file.hpp"

namespace thdpack {

struct DeferredCommits::Pending {
  std::unique_ptr<OutputFile> first;
  std::unique_ptr<OutputFile> second;  ///< set for commit_pair
};

namespace {

thread_local DeferredCommits* active_scope = nullptr;

DeferredCommits* deferred_scope() {
  return active_scope;
}

std::string error_text() {
  return std::strerror(errno);
}

// Where the bytes finally go: a symbolic link is followed, so the link stays and its target is
// replaced, or created when the link dangles. A link that loops is refused (InvalidArgument).
std::string final_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    const auto resolved = std::filesystem::canonical(path, ec);
    if (!ec) return resolved.string();
  }
  // Not there: a dangling link, a looping one, or no file at all.
  constexpr int kMaxHops = 40;  // as the kernel's limit on links followed
  std::filesystem::path at(path);
  for (int hop = 0; hop <= kMaxHops; ++hop) {
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(at, ec))) return at.string();
    const std::filesystem::path target = std::filesystem::read_symlink(at, ec);
    if (ec) break;
    at = target.is_absolute() ? target : at.parent_path() / target;
  }
  fail("output '", path, "' is a symbolic link that loops (or passes ", std::to_string(kMaxHops),
       " links); remove it or write somewhere else (nothing was written)");
}

// The process umask, read from /proc/self/status: reading it with umask() means setting it, which
// races with other threads creating files at that moment. Where /proc has no "Umask:" line (old
// kernels), umask() is read once, on first use.
mode_t process_umask() {
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::strncmp(line, "Umask:", 6) == 0) {
        std::fclose(f);
        return static_cast<mode_t>(std::strtoul(line + 6, nullptr, 8) & 0777);
      }
    }
    std::fclose(f);
  }
  static std::once_flag once;
  static mode_t mask = 022;
  std::call_once(once, [] {
    mask = ::umask(0);
    ::umask(mask);
  });
  return mask;
}

mode_t new_file_mode() {
  return 0666 & ~process_umask();
}

// The rename itself on disk: fsync of the folder that holds `path`. Filesystems that cannot sync
// a folder (EINVAL) have nothing more to do.
void sync_folder(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string folder = parent.empty() ? "." : parent.string();
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool synced = fd >= 0 && (detail::file_syscalls().fsync(fd) == 0 || errno == EINVAL);
  const std::string reason = error_text();
  if (fd >= 0) ::close(fd);
  if (!synced) {
    fail("'", path, "' is in place but its folder could not be synced (", reason,
         "); it may not survive a crash");
  }
}

// A second name for the file at `path`, hidden in its folder, so that it can be put back after
// `path` was replaced: a hard link, or (filesystems without hard links) the file itself renamed.
struct Backup {
  std::string path;    ///< "" when nothing was at the original path
  bool moved = false;  ///< renamed rather than linked: the original path is empty meanwhile
};

Backup keep_backup(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  const std::filesystem::path target(path);
  const std::filesystem::path folder = detail::folder_of(target);
  std::string stem = detail::backup_name_start(target).append(std::to_string(::getpid()));
  for (int attempt = 0;; ++attempt) {
    std::string name = stem;
    name.append(".").append(std::to_string(attempt));
    const std::string backup = (folder / name).string();
    if (::link(path.c_str(), backup.c_str()) == 0) return {backup, false};
    if (errno == EEXIST) continue;
    if (::rename(path.c_str(), backup.c_str()) == 0) return {backup, true};
    fail("cannot keep the old '", path, "' while replacing it: ", error_text(),
         " (nothing was moved into place)");
  }
}

// Undoes the replacement of `path`: the old file back from the backup, or (none before) the new
// one removed, so that `path` belongs with `partner` again.
void put_back(const std::string& path, const Backup& backup, const std::string& partner) {
  const bool restored =
      backup.path.empty() ? ::unlink(path.c_str()) == 0 || errno == ENOENT
                          : detail::file_syscalls().rename(backup.path.c_str(), path.c_str()) == 0;
  if (!restored) {
    fail("'", path, "' may be new while '", partner, "' is old, and then they do not belong ",
         "together: ",
         (backup.path.empty()
              ? "removing the new '" + path + "' failed"
              : "the old '" + path + "' could not be put back from '" + backup.path + "'"),
         " (", error_text(), ")");
  }
}

// After a failed commit_pair: `path` back as it was (`moved`: the new file had been renamed
// there), the backup gone.
void undo_first_move(const std::string& path, bool moved, const Backup& backup,
                     const std::string& partner) {
  if (moved || backup.moved) {
    put_back(path, backup, partner);
  } else if (!backup.path.empty()) {
    ::unlink(backup.path.c_str());
  }
}

}  // namespace

void refuse_replacing_inputs(const std::string& path) {
  if (path.empty()) throw InvalidArgument("an output path is empty");
  const std::string input = leased_input_at(path);
  if (!input.empty()) {
    fail("output '", path, "' is the same file as the input '", input,
         "'; write the output somewhere else (nothing was written)");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    fail("output '", path, "' exists and is not a regular file");
  }
}

void refuse_replacing_inputs(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) refuse_replacing_inputs(p);
}

OutputFile::OutputFile(const std::string& path) {
  refuse_replacing_inputs(path);
  path_ = final_path(path);
  const std::filesystem::path target(path_);
  detail::remove_stale_temporaries(target);
  std::string templ = detail::temporary_template(target);
  const int fd = ::mkstemp(templ.data());
  if (fd < 0) fail("cannot create '", path, "': ", error_text());
  temp_path_ = templ;
  registration_ = std::make_shared<detail::TemporaryRegistration>(temp_path_.c_str());
  struct stat st {};
  const mode_t mode = ::stat(path_.c_str(), &st) == 0 ? (st.st_mode & 07777) : new_file_mode();
  ::fchmod(fd, mode);
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    const std::string reason = error_text();
    ::close(fd);
    ::unlink(temp_path_.c_str());
    fail("cannot create '", path, "': ", reason);
  }
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::exchange(other.temp_path_, {})),
      file_(std::exchange(other.file_, nullptr)),
      closed_(other.closed_),
      committed_(other.committed_) {
  other.registration_.reset();
  // The registration points at the temporary file's name, which lives here now.
  if (!temp_path_.empty() && !committed_) {
    registration_ = std::make_shared<detail::TemporaryRegistration>(temp_path_.c_str());
  }
}

OutputFile::~OutputFile() {
  if (file_ != nullptr) std::fclose(file_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  registration_.reset();
}

void OutputFile::write(const void* data, size_t n) {
  if (file_ == nullptr) fail("'", path_, "' is already complete");
  if (n > 0 && std::fwrite(data, 1, n, file_) != n) {
    fail("cannot write '", path_, "': ", error_text());
  }
}

void OutputFile::close() {
  if (file_ == nullptr) return;
  // On disk before it is renamed: a crash after the rename must not leave an empty file in place
  // of the old one.
  const bool synced =
      std::fflush(file_) == 0 && detail::file_syscalls().fsync(::fileno(file_)) == 0;
  const std::string reason = error_text();
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (!synced || rc != 0) {
    fail("cannot write '", path_, "': ", (synced ? error_text() : reason));
  }
  closed_ = true;
}

void OutputFile::commit() {
  if (committed_) return;
  if (DeferredCommits* scope = deferred_scope()) {
    close();
    if (!closed_) fail("'", path_, "' was not written");
    scope->pending_.push_back({std::make_unique<OutputFile>(std::move(*this)), nullptr});
    committed_ = true;  // handed over: in place once the scope commits
    return;
  }
  commit_now();
}

void OutputFile::commit_now() {
  if (committed_) return;
  close();
  if (!closed_) fail("'", path_, "' was not written");
  // The check again, as late as possible: an input opened since the constructor is not replaced.
  refuse_replacing_inputs(path_);
  move_into_place();
  sync_folder(path_);
}

void OutputFile::move_into_place() {
  if (detail::file_syscalls().rename(temp_path_.c_str(), path_.c_str()) != 0) {
    fail("cannot move the new '", path_, "' into place: ", error_text());
  }
  committed_ = true;
  registration_.reset();  // the name is free again: a signal must not remove another file by it
}

void commit_pair(OutputFile& first, OutputFile& second) {
  if (DeferredCommits* scope = deferred_scope()) {
    first.close();
    second.close();
    if (!first.closed_ || !second.closed_) {
      fail("'", (first.closed_ ? second.path_ : first.path_), "' was not written");
    }
    scope->pending_.push_back({std::make_unique<OutputFile>(std::move(first)),
                               std::make_unique<OutputFile>(std::move(second))});
    first.committed_ = second.committed_ = true;  // handed over
    return;
  }
  first.close();
  second.close();
  if (!first.closed_ || !second.closed_) {
    fail("'", (first.closed_ ? second.path_ : first.path_), "' was not written");
  }
  refuse_replacing_inputs(first.path_);
  refuse_replacing_inputs(second.path_);
  const Backup backup = keep_backup(first.path_);
  try {
    first.move_into_place();
    sync_folder(first.path_);
    second.move_into_place();
  } catch (const InvalidArgument& e) {
    undo_first_move(first.path_, std::exchange(first.committed_, false), backup, second.path_);
    fail(std::string(e.what()), "; '", first.path_, "' and '", second.path_,
         "' are left as they were");
  } catch (...) {
    undo_first_move(first.path_, std::exchange(first.committed_, false), backup, second.path_);
    throw;
  }
  if (!backup.path.empty()) ::unlink(backup.path.c_str());
  sync_folder(second.path_);
}

DeferredCommits::DeferredCommits() {
  check(active_scope == nullptr, "outputs are already deferred on this thread");
  active_scope = this;
}

DeferredCommits::~DeferredCommits() {
  if (active_scope == this) active_scope = nullptr;
  // Not committed: each pending OutputFile removes its temporary file as it goes.
}

std::string DeferredCommits::readable_path(const std::string& path) const {
  const std::string target = final_path(path);
  for (const Pending& p : pending_) {
    for (const OutputFile* f : {p.first.get(), p.second.get()}) {
      if (f != nullptr && f->path_ == target) return f->temp_path_;
    }
  }
  return path;
}

void DeferredCommits::commit_all() {
  check(active_, "commit_all() after commit_all()");
  active_ = false;
  active_scope = nullptr;
  std::vector<Pending> pending = std::move(pending_);
  for (Pending& p : pending) {
    if (p.second) {
      p.first->committed_ = p.second->committed_ = false;
      commit_pair(*p.first, *p.second);
    } else {
      p.first->committed_ = false;
      p.first->commit_now();
    }
  }
}

}  // namespace thdpack
