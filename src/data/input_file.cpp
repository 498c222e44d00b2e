// Safe opening of input files and the registry of inputs in use (see input_file.hpp).

#include "thdpack/data/input_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

struct stat stat_input(const std::string& path, const std::string& what) {
  struct stat st {};
  if (path.empty()) throw InvalidArgument(what + ": the path is empty");
  if (::stat(path.c_str(), &st) != 0) {
    throw InvalidArgument("cannot open " + what + " '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw InvalidArgument(what + " '" + path + "' is " + kind_of(st.st_mode) +
                          ", not a regular file; give a file");
  }
  return st;
}

// Inputs in use: (device, inode) -> (path, number of leases).
struct Registry {
  std::mutex mutex;
  std::map<std::pair<uint64_t, uint64_t>, std::pair<std::string, int>> leases;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: leases may outlive static teardown
  return *r;
}

}  // namespace

void require_regular_file(const std::string& path, const std::string& what) {
  stat_input(path, what);
}

std::ifstream open_input_file(const std::string& path, const std::string& what) {
  require_regular_file(path, what);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InvalidArgument("cannot open " + what + " '" + path + "': " + std::strerror(errno));
  return in;
}

std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes) {
  const struct stat st = stat_input(path, what);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw InvalidArgument(what + " '" + path + "' has " + std::to_string(st.st_size) +
                          " bytes; the limit is " + std::to_string(max_bytes));
  }
  std::ifstream in = open_input_file(path, what);
  std::ostringstream text;
  // Read at most one byte past the limit: a file that grew since stat is refused, not read whole.
  std::string chunk(std::min<size_t>(max_bytes + 1, size_t{1} << 16), '\0');
  size_t total = 0;
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(in.gcount());
    total += got;
    if (total > max_bytes) {
      throw InvalidArgument(what + " '" + path + "' is larger than the limit of " +
                            std::to_string(max_bytes) + " bytes");
    }
    text.write(chunk.data(), static_cast<std::streamsize>(got));
  }
  return text.str();
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
    if (line.size() >= max_bytes) {
      throw InvalidArgument(where + ": line longer than " + std::to_string(max_bytes) +
                            " bytes (the limit)");
    }
    line.push_back(static_cast<char>(c));
  }
}

InputLease::InputLease(const std::string& path, const std::string& what) {
  const struct stat st = stat_input(path, what);
  device_ = static_cast<uint64_t>(st.st_dev);
  inode_ = static_cast<uint64_t>(st.st_ino);
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  auto& entry = r.leases[{device_, inode_}];
  if (entry.second++ == 0) entry.first = path;
}

InputLease::~InputLease() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.leases.find({device_, inode_});
  if (it != r.leases.end() && --it->second.second == 0) r.leases.erase(it);
}

std::string leased_input_at(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it =
      r.leases.find({static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)});
  return it == r.leases.end() ? "" : it->second.first;
}

}  // namespace thdpack
