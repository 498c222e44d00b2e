#pragma once
// The temporary files of OutputFile: names that fit the folder's name limit and say which process
// (host and PID) writes them, removal of the ones a killed writer left, and removal of the live
// ones when the process is interrupted by a signal (see clean_up_outputs_on_signals,
// output_file.hpp).

#include <cstddef>
#include <filesystem>
#include <string>

namespace thdpack::detail {

/// The folder `target` is in ("." for a bare name).
std::filesystem::path folder_of(const std::filesystem::path& target);
/// The longest file name `folder` takes (pathconf NAME_MAX; NAME_MAX where it does not say).
size_t longest_name(const std::filesystem::path& folder);
/// ".NAME.old.": what the hidden backup of `target` a commit keeps (output_file.cpp, commit_pair)
/// is named, followed by PID.N; a reader of a mixed pair looks for it.
std::string backup_name_start(const std::filesystem::path& target);

/// A mkstemp template beside `target`: ".NAME.tmp.HOST.PID.XXXXXX", NAME cut short where the whole
/// would pass the folder's longest file name, so that every name the folder takes can be written.
std::string temporary_template(const std::filesystem::path& target);

/// Removes the temporary files of `target` that a process of this host left when it died (killed,
/// or crashed) before removing them: those whose PID no longer runs. Temporaries of other hosts
/// (a shared file system) and of running processes stay. Errors are ignored: this is tidying up.
void remove_stale_temporaries(const std::filesystem::path& target);

/// While it lives, the signal handlers of clean_up_outputs_on_signals remove `path` (a live
/// temporary file) before the process ends. `path` must stay valid meanwhile.
class TemporaryRegistration {
 public:
  explicit TemporaryRegistration(const char* path);
  ~TemporaryRegistration();
  TemporaryRegistration(const TemporaryRegistration&) = delete;
  TemporaryRegistration& operator=(const TemporaryRegistration&) = delete;

 private:
  size_t slot_;
};

}  // namespace thdpack::detail
