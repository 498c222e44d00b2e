#include "data/temporary_files.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>

#include "thdpack/data/output_file.hpp"

namespace thdpack {
namespace detail {
namespace {

constexpr std::string_view kTempMarker = ".tmp.";
constexpr size_t kHostChars = 24;  // of the host name in a temporary name

// This host's name as it appears in temporary names (read once): at most kHostChars, dots made
// dashes so that the name splits back into its parts.
const std::string& host_tag() {
  static const std::string tag = [] {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return std::string("host");
    std::string t(host, std::min(std::strlen(host), kHostChars));
    std::replace(t.begin(), t.end(), '.', '-');
    return t;
  }();
  return tag;
}

// ".NAME.tmp.": what every temporary name of `target` starts with, NAME cut to leave `room` bytes.
std::string prefix_of(const std::filesystem::path& target, size_t room) {
  const std::string name = target.filename().string();
  const size_t fixed = 1 + kTempMarker.size();
  const size_t limit = longest_name(folder_of(target));
  const size_t keep = limit > fixed + room ? std::min(name.size(), limit - fixed - room) : 1;
  std::string prefix = ".";
  prefix.append(name, 0, std::max<size_t>(keep, 1)).append(kTempMarker);
  return prefix;
}

constexpr size_t kRoom = kHostChars + 1 + 10 + 1 + 6;  // HOST.PID.XXXXXX

// Temporary files being written, for the signal handler: each slot holds a live temporary file's
// path (owned by its OutputFile) or nullptr.
constexpr size_t kSlots = 256;
std::array<std::atomic<const char*>, kSlots> live_temporaries{};

extern "C" void remove_live_temporaries_and_end(int signal) {
  for (auto& slot : live_temporaries) {
    if (const char* path = slot.load()) ::unlink(path);  // async-signal-safe
  }
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

}  // namespace

size_t longest_name(const std::filesystem::path& folder) {
  const long limit = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  return limit > 0 ? static_cast<size_t>(limit) : NAME_MAX;
}

std::filesystem::path folder_of(const std::filesystem::path& target) {
  return target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
}

std::string backup_name_start(const std::filesystem::path& target) {
  return std::string(".").append(target.filename().string()).append(".old.");
}

std::string temporary_template(const std::filesystem::path& target) {
  std::string name = prefix_of(target, kRoom);
  name.append(host_tag()).append(".").append(std::to_string(::getpid())).append(".XXXXXX");
  return (folder_of(target) / name).string();
}

void remove_stale_temporaries(const std::filesystem::path& target) {
  std::string prefix = prefix_of(target, kRoom);
  prefix.append(host_tag()).append(".");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder_of(target), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // What follows is PID.XXXXXX.
    const std::string rest = name.substr(prefix.size());
    const size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(rest.c_str(), &end, 10);
    if (end != rest.c_str() + dot || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    std::filesystem::remove(entry.path(), ec);
  }
}

TemporaryRegistration::TemporaryRegistration(const char* path) : slot_(kSlots) {
  for (size_t i = 0; i < kSlots; ++i) {
    const char* expected = nullptr;
    if (live_temporaries[i].compare_exchange_strong(expected, path)) {
      slot_ = i;
      return;
    }
  }
  // More live outputs than slots: this one is left to the next run's remove_stale_temporaries.
}

TemporaryRegistration::~TemporaryRegistration() {
  if (slot_ < kSlots) live_temporaries[slot_].store(nullptr);
}

}  // namespace detail

void clean_up_outputs_on_signals() {
  struct sigaction action {};
  action.sa_handler = detail::remove_live_temporaries_and_end;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaction(signal, &action, nullptr);
  // Past RLIMIT_FSIZE a write fails with EFBIG instead, which names the file and removes its
  // temporary like any failed write.
  ::signal(SIGXFSZ, SIG_IGN);
}

}  // namespace thdpack
